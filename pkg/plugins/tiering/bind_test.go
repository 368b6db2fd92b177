package tiering

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
)

// TestBind: a pod Tiering placed is bound by Tiering with its tier on the
// Binding (kube-apiserver copies a Binding's annotations onto the pod);
// every other pod is left to DefaultBinder.
func TestBind(t *testing.T) {
	for name, tc := range map[string]struct {
		// reserve runs DynamicResources' and Tiering's Reserve before Bind.
		reserve     bool
		wantSkip    bool
		wantBinding *v1.Binding
	}{
		"tiered pod is bound with its tier": {
			reserve: true,
			wantBinding: &v1.Binding{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: "default", Name: "p", UID: "p-uid",
					Annotations: map[string]string{gpuv1.TierAnnotation: "2/3: A100", gpuv1.DevicesAnnotation: "node-a/gpu-0=GPU-node-a-0",
						gpuv1.PassedOverAnnotation: `[{"tier":"1/3","name":"h100","need":1,"matching":0,"free":0,"largestFree":0,"allocated":0,"problem":"none in the pool"}]`},
				},
				Target: v1.ObjectReference{Kind: "Node", Name: "node-a"},
			},
		},
		"pod without a Tiering placement is skipped": {wantSkip: true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, []*v1.Node{testNode("node-a")},
				[]*resourceapi.ResourceSlice{testSlice("node-a", gpus("A100", 80, 1)...)},
				[]*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100", "A100", "L4")})
			var bindings []*v1.Binding
			e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "binding" {
					return false, nil, nil
				}
				bindings = append(bindings, a.(k8stesting.CreateAction).GetObject().(*v1.Binding))
				return true, nil, nil
			})
			pod := testPod("p")
			cs := fwk.CycleState(framework.NewCycleState())
			if tc.reserve {
				_, cs = e.cycle(t, pod)
				if st := e.dr.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
					t.Fatalf("DynamicResources Reserve: %v", st)
				}
				if st := e.tiering.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
					t.Fatalf("Tiering Reserve: %v", st)
				}
				// The event will say why the preferred tier was passed over.
				p, err := getPlacement(cs)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]waits.PassedTier{{Tier: "1/3", Name: "h100", Need: 1, Problem: "none in the pool"}}, p.passedOver); diff != "" {
					t.Errorf("passed-over tiers (-want +got):\n%s", diff)
				}
			}

			st := e.tiering.Bind(e.ctx, cs, pod, "node-a")
			if tc.wantSkip {
				if !st.IsSkip() {
					t.Errorf("Bind: %v, want Skip", st)
				}
				if len(bindings) != 0 {
					t.Errorf("Bind wrote %d bindings for a pod it skipped", len(bindings))
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("Bind: %v", st)
			}
			if len(bindings) != 1 {
				t.Fatalf("Bind wrote %d bindings, want 1", len(bindings))
			}
			if diff := cmp.Diff(tc.wantBinding, bindings[0]); diff != "" {
				t.Errorf("binding (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBindError: a refused binding is an error status that names its
// cause (BindingConflict for the apiserver's 409), the pod and node, and
// wraps the apiserver's error, so the scheduler unreserves and retries the
// pod.
func TestBindError(t *testing.T) {
	e := newEnv(t, []*v1.Node{testNode("node-a")},
		[]*resourceapi.ResourceSlice{testSlice("node-a", gpus("H100", 80, 1)...)},
		[]*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100")})
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(v1.Resource("pods/binding"), "p", errors.New("pod p is being deleted, cannot be assigned to a host"))
	})
	pod := testPod("p")
	_, cs := e.cycle(t, pod)
	if st := e.dr.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
		t.Fatalf("DynamicResources Reserve: %v", st)
	}
	if st := e.tiering.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
		t.Fatalf("Tiering Reserve: %v", st)
	}
	st := e.tiering.Bind(e.ctx, cs, pod, "node-a")
	if st.Code() != fwk.Error {
		t.Fatalf("Bind: %v, want Error", st)
	}
	err := st.AsError()
	if want := "BindingConflict: bind pod default/p to node node-a: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Bind error %q, want prefix %q", err, want)
	}
	if !apierrors.IsConflict(err) {
		t.Errorf("Bind error %v does not wrap the apiserver's Conflict", err)
	}
}
