package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Track H: a target bound to a GPUReservation starts on a copy of its claim
// template pinned to the reservation's UUIDs, in the same workload write.
func TestReservationPinning(t *testing.T) {
	e := newEnv(t, at(19, 8, 0), poolObjects()...)
	ds := weekSchedule()
	ds.Spec.Targets[0].ReservationName = "llama-gpus"
	e.addSchedule(ds)
	var uuids []string
	for i := 2; i < 10; i++ {
		uuids = append(uuids, fmt.Sprintf("GPU-gpu-node-%d", i))
	}
	res := &v1alpha1.GPUReservation{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "GPUReservation"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama-gpus"},
	}
	for _, u := range uuids {
		res.Status.Devices = append(res.Status.Devices, v1alpha1.ReservedDevice{UUID: u, Healthy: true})
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(res)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(v1alpha1.GPUReservationsResource).Namespace(ns).Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.converge("pool", 10)
	d, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, "md-llama70b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := ptr.Deref(d.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName, "")
	if !strings.HasPrefix(name, "gpu8-pin-") || ptr.Deref(d.Spec.Replicas, 0) != 1 {
		t.Fatalf("llama70b template %q replicas %d, want a gpu8-pin-* copy and 1 replica", name, ptr.Deref(d.Spec.Replicas, 0))
	}
	tmpl, err := e.client.ResourceV1().ResourceClaimTemplates(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sels := tmpl.Spec.Spec.Devices.Requests[0].Exactly.Selectors
	if len(sels) != 1 || !strings.Contains(sels[0].CEL.Expression, `.uuid in ["GPU-gpu-node-2"`) {
		t.Errorf("pinned selectors %+v, want a uuid CEL selector over the reservation's GPUs", sels)
	}
	if tmpl.Labels[gpuv1.PinnedFromLabel] != "gpu8" {
		t.Errorf("pinned-from label %q", tmpl.Labels[gpuv1.PinnedFromLabel])
	}
	if got := tmpl.Annotations[gpuv1.ReservationAnnotation]; got != "llama-gpus" {
		t.Errorf("reservation annotation %q, want llama-gpus", got)
	}
	// The held GPUs carry the reservation's taint: without its toleration
	// the selector would leave the claim nothing to allocate.
	tols := tmpl.Spec.Spec.Devices.Requests[0].Exactly.Tolerations
	if len(tols) != 1 || tols[0].Key != gpuv1.ReservedTaintKey || tols[0].Value != gpuv1.ReservedTaintValue(ns, "llama-gpus") ||
		tols[0].Operator != resourceapi.DeviceTolerationOpEqual || tols[0].Effect != resourceapi.DeviceTaintEffectNoSchedule {
		t.Errorf("pinned tolerations %+v, want the reservation's %s=%s:NoSchedule", tols, gpuv1.ReservedTaintKey, gpuv1.ReservedTaintValue(ns, "llama-gpus"))
	}
}

// A template that already tolerates the reservation and asks through
// firstAvailable gets the selector on every subrequest and the toleration
// once.
func TestPinSpecSubrequestsAndExistingToleration(t *testing.T) {
	tol := resourceapi.DeviceToleration{Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual,
		Value: gpuv1.ReservedTaintValue(ns, "r"), Effect: resourceapi.DeviceTaintEffectNoSchedule}
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "h200", DeviceClassName: gpuv1.DeviceClassName, Tolerations: []resourceapi.DeviceToleration{tol}},
			{Name: "h100", DeviceClassName: gpuv1.DeviceClassName},
		},
	}}}}
	out := pinSpec(spec, ns, "r", []string{"GPU-b", "GPU-a"})
	for _, sub := range out.Devices.Requests[0].FirstAvailable {
		if len(sub.Tolerations) != 1 || sub.Tolerations[0] != tol {
			t.Errorf("subrequest %s tolerations %+v, want exactly %+v", sub.Name, sub.Tolerations, tol)
		}
		if len(sub.Selectors) != 1 || !strings.Contains(sub.Selectors[0].CEL.Expression, `uuid in ["GPU-b", "GPU-a"]`) {
			t.Errorf("subrequest %s selectors %+v", sub.Name, sub.Selectors)
		}
	}
	if len(spec.Devices.Requests[0].FirstAvailable[1].Tolerations) != 0 {
		t.Error("pinSpec changed its input")
	}
}

func TestReservationWithoutDevicesIsIneligible(t *testing.T) {
	e := newEnv(t, at(19, 8, 0), poolObjects()...)
	ds := weekSchedule()
	ds.Spec.Targets[0].ReservationName = "missing"
	e.addSchedule(ds)
	e.mustPass("pool")
	st := e.targetStatus("pool", "llama70b")
	if st.Reason != ReasonIneligible || !strings.Contains(st.Message, IneligibleReservation) {
		t.Fatalf("llama70b = %s/%s %q, want Ineligible{%s}", st.Phase, st.Reason, st.Message, IneligibleReservation)
	}
	if e.replicas("md-qwen32b") != 1 {
		t.Errorf("qwen32b released although llama70b can never start")
	}
}

func TestStopTimeout(t *testing.T) {
	e := newEnv(t, at(19, 8, 0), poolObjects()...)
	e.addSchedule(weekSchedule())
	// A qwen32b pod that never goes away.
	e.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "md-qwen32b-stuck", Labels: map[string]string{"app": "md-qwen32b"},
		DeletionTimestamp: ptr.To(metav1.NewTime(at(19, 8, 0))), Finalizers: []string{"example.com/stuck"}}})
	for range 200 {
		e.mustPass("pool")
		if e.targetStatus("pool", "qwen32b").Phase == v1alpha1.TargetPhaseFailed {
			break
		}
		e.clock.Step(5 * time.Second)
	}
	st := e.targetStatus("pool", "qwen32b")
	if st.Reason != ReasonStopTimeout || !strings.Contains(st.Message, "1 pods still present") {
		t.Fatalf("qwen32b = %s/%s %q, want StopTimeout naming the pod", st.Phase, st.Reason, st.Message)
	}
	if l := e.targetStatus("pool", "llama70b"); l.Reason != ReasonTransitionAborted || e.replicas("md-llama70b") != 0 {
		t.Errorf("llama70b = %s/%s replicas %d, want TransitionAborted and not started", l.Phase, l.Reason, e.replicas("md-llama70b"))
	}
}

func TestStartUnschedulable(t *testing.T) {
	e := newEnv(t, at(19, 8, 0), poolObjects()...)
	e.addSchedule(weekSchedule())
	e.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "md-llama70b-x", Labels: map[string]string{"app": "md-llama70b"}},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse,
			Reason: v1.PodReasonUnschedulable, Message: "0/1 nodes are available: cannot allocate all claims"}}}})
	for range 100 {
		if _, err := e.reconcile("pool"); err != nil {
			t.Fatal(err)
		}
		e.settle(false)
		if e.targetStatus("pool", "llama70b").Phase == v1alpha1.TargetPhaseFailed {
			break
		}
		e.clock.Step(5 * time.Second)
	}
	st := e.targetStatus("pool", "llama70b")
	if st.Reason != ReasonStartUnschedulable || !strings.Contains(st.Message, "cannot allocate all claims") {
		t.Fatalf("llama70b = %s/%s %q, want StartUnschedulable with the scheduler's message", st.Phase, st.Reason, st.Message)
	}
}

// apply-now lets a target that failed in the current interval try again,
// with a new step key.
func TestApplyNowRetries(t *testing.T) {
	e := newEnv(t, at(19, 8, 0), poolObjects()...)
	e.create(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "md-qwen32b"}}})
	e.addSchedule(weekSchedule())
	e.mustPass("pool")
	if st := e.targetStatus("pool", "qwen32b"); st.Reason != ReasonAliasBlocked {
		t.Fatalf("qwen32b = %s, want AliasBlocked", st.Reason)
	}
	// The operator removes the alias and asks for a new attempt.
	if err := e.client.CoreV1().Services(ns).Delete(e.ctx, "chat", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Get(e.ctx, "pool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(map[string]string{gpuv1.ApplyNowAnnotation: "2026-10-19T08:05:00+07:00"})
	if _, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Update(e.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.converge("pool", 10)
	if e.replicas("md-qwen32b") != 0 || e.replicas("md-llama70b") != 1 {
		t.Fatalf("after apply-now: qwen32b %d llama70b %d, want 0 and 1", e.replicas("md-qwen32b"), e.replicas("md-llama70b"))
	}
	if key := e.targetStatus("pool", "qwen32b").Steps[0].Key; !strings.HasSuffix(key, "#2026-10-19T08:05:00+07:00") {
		t.Errorf("retry key %q does not carry the apply-now value", key)
	}
}

func TestLeaderWorkerSetRefusedWithoutCRD(t *testing.T) {
	e := newEnv(t, at(19, 9, 0), poolObjects()...)
	ds := weekSchedule()
	ds.Spec.Targets[0].WorkloadRef = v1alpha1.WorkloadReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "lws"}
	e.addSchedule(ds)
	e.mustPass("pool")
	st := e.targetStatus("pool", "llama70b")
	if st.Reason != ReasonIneligible || !strings.Contains(st.Message, IneligibleKindNotInstalled) {
		t.Fatalf("LeaderWorkerSet target = %s/%s %q, want Ineligible{%s}", st.Phase, st.Reason, st.Message, IneligibleKindNotInstalled)
	}
}
