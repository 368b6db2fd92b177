package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// The captured GPUs and holders come from the pool: each device once, its
// holder the (last) claim allocated it, each pod its devices, and a device
// given whole to two claims at once reported as double-booked.
func TestCaptureGPUsAndHolders(t *testing.T) {
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "gpu.rota.dev", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1},
			Devices: []resourceapi.Device{
				{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("H100")}, "uuid": {StringValue: ptr.To("GPU-0")}},
					Taints: []resourceapi.DeviceTaint{{Key: "rota.dev/reserved", Value: "ml.r", Effect: resourceapi.DeviceTaintEffectNoSchedule}}},
				{Name: "gpu-1", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("H100")}, "uuid": {StringValue: ptr.To("GPU-1")}}},
			},
		},
	}
	claim := func(name, pod, device string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
			Status: resourceapi.ResourceClaimStatus{
				Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
					{Request: "gpu", Driver: "gpu.rota.dev", Pool: "n1", Device: device},
				}}},
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod}},
			},
		}
	}
	pool := gpupool.NewPool([]*resourceapi.ResourceSlice{slice}, []*resourceapi.ResourceClaim{claim("a", "a-0", "gpu-0"), claim("b", "b-0", "gpu-0")}, nil)
	st := &State{GPUs: map[string]GPU{}, Holders: map[string]Holder{}}
	st.Pods = []Pod{{Name: "ml/a-0", Workload: "ml/a"}, {Name: "ml/b-0", Workload: "ml/b"}}
	byName := map[string]*Pod{"ml/a-0": &st.Pods[0], "ml/b-0": &st.Pods[1]}
	st.addGPUs(pool)
	st.addHolders(pool, byName)

	wantGPUs := map[string]GPU{
		"n1/gpu-0": {Node: "n1", Name: "gpu-0", UUID: "GPU-0", Model: "H100", Taints: []string{"rota.dev/reserved=ml.r:NoSchedule"}},
		"n1/gpu-1": {Node: "n1", Name: "gpu-1", UUID: "GPU-1", Model: "H100"},
	}
	if diff := cmp.Diff(wantGPUs, st.GPUs); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]Holder{"n1/gpu-0": {Workload: "ml/b", Pod: "ml/b-0", Claim: "ml/b"}}, st.Holders); diff != "" {
		t.Errorf("Holders (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Device{{Node: "n1", Name: "gpu-0", UUID: "GPU-0", Model: "H100", Claim: "ml/a"}}, st.Pods[0].Devices); diff != "" {
		t.Errorf("devices of ml/a-0 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"GPU n1/gpu-0 held by claims ml/a and ml/b at once"}, st.DoubleBooked); diff != "" {
		t.Errorf("DoubleBooked (-want +got):\n%s", diff)
	}
}

// A pod's rota.dev/ annotations are reported, but the advice (the
// report's waiting.advice) and other annotations are not.
func TestRotaAnnotations(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		"rota.dev/borrowed": "H100=2", "rota.dev/checkpoint": "grace=5s", "rota.dev/advice": "{}", "example.com/x": "y",
	}}}
	want := map[string]string{"rota.dev/borrowed": "H100=2", "rota.dev/checkpoint": "grace=5s"}
	if diff := cmp.Diff(want, rotaAnnotations(p)); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if got := rotaAnnotations(&v1.Pod{}); got != nil {
		t.Errorf("no annotations: %v, want nil", got)
	}
}
