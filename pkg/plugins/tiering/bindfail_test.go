package tiering

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/waits"
)

// TestBindingFailureCauses: a placement that cannot be bound is told
// apart by cause, in the status message the scheduler reports and in
// rota_tiering_binding_failures_total: the node removed (NodeLost), the
// device no longer published (StaleResourceSlice), the binding refused
// with 409 (BindingConflict) or otherwise (BindError).
func TestBindingFailureCauses(t *testing.T) {
	cases := map[string]struct {
		// change is what happens between the cycle and the stage.
		change    func(t *testing.T, e *env)
		bindErr   error
		stage     string
		cause     waits.BindFailure
		wantCode  fwk.Code
		wantStart string
	}{
		"node removed before PreBind": {
			change: func(t *testing.T, e *env) {
				if err := e.client.CoreV1().Nodes().Delete(e.ctx, "node-a", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, e, "node gone from the informer", func() bool {
					_, err := e.tiering.nodes.Get("node-a")
					return apierrors.IsNotFound(err)
				})
			},
			stage: stagePreBind, cause: waits.NodeLost, wantCode: fwk.Unschedulable,
			wantStart: "NodeLost: node node-a was removed before binding",
		},
		"slice republished without the device before PreBind": {
			change: func(t *testing.T, e *env) {
				s := testSlice("node-a", gpus("H100", 80, 1)...)
				s.Spec.Devices[0].Name = "gpu-9"
				if _, err := e.client.ResourceV1().ResourceSlices().Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, e, "republished slice in the DRA manager", func() bool {
					slices, err := e.tiering.dra.ResourceSlices().ListWithDeviceTaintRules()
					return err == nil && len(slices) == 1 && slices[0].Spec.Devices[0].Name == "gpu-9"
				})
			},
			stage: stagePreBind, cause: waits.StaleResourceSlice, wantCode: fwk.Unschedulable,
			wantStart: "StaleResourceSlice: device gpu.rota.dev/node-a/gpu-0 on node node-a is no longer published",
		},
		"binding refused with 409": {
			bindErr: apierrors.NewConflict(v1.Resource("pods/binding"), "p", errors.New("pod p is already assigned to node node-b")),
			stage:   stageBind, cause: waits.BindingConflict, wantCode: fwk.Error,
			wantStart: "BindingConflict: bind pod default/p to node node-a",
		},
		"binding refused otherwise": {
			bindErr: apierrors.NewForbidden(v1.Resource("pods/binding"), "p", errors.New("no")),
			stage:   stageBind, cause: waits.BindError, wantCode: fwk.Error,
			wantStart: "BindError: bind pod default/p to node node-a",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, []*v1.Node{testNode("node-a")},
				[]*resourceapi.ResourceSlice{testSlice("node-a", gpus("H100", 80, 1)...)},
				[]*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100")})
			if tc.bindErr != nil {
				e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
					return a.GetSubresource() == "binding", nil, tc.bindErr
				})
			}
			counter := e.tiering.metrics.bindingFailures.WithLabelValues(string(tc.cause), tc.stage)
			before, err := testutil.GetCounterMetricValue(counter)
			if err != nil {
				t.Fatal(err)
			}
			pod := testPod("p")
			_, cs := e.cycle(t, pod)
			if st := e.dr.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
				t.Fatalf("DynamicResources Reserve: %v", st)
			}
			if st := e.tiering.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
				t.Fatalf("Tiering Reserve: %v", st)
			}
			if tc.change != nil {
				tc.change(t, e)
			}
			var st *fwk.Status
			if tc.stage == stagePreBind {
				st = e.tiering.PreBind(e.ctx, cs, pod, "node-a")
			} else {
				st = e.tiering.Bind(e.ctx, cs, pod, "node-a")
			}
			if st.Code() != tc.wantCode {
				t.Fatalf("%s: %v, want code %v", tc.stage, st, tc.wantCode)
			}
			msg := st.Message()
			if tc.wantCode == fwk.Error {
				msg = st.AsError().Error()
			}
			if !strings.HasPrefix(msg, tc.wantStart) {
				t.Errorf("%s: %q, want it to start %q", tc.stage, msg, tc.wantStart)
			}
			after, err := testutil.GetCounterMetricValue(counter)
			if err != nil {
				t.Fatal(err)
			}
			if after-before != 1 {
				t.Errorf("binding_failures_total{cause=%s,stage=%s} rose by %v, want 1", tc.cause, tc.stage, after-before)
			}
		})
	}
}

func waitFor(t *testing.T, e *env, what string, ok func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 10e6, 5e9, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
