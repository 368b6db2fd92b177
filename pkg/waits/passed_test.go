package waits

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

func TestPassedTierLine(t *testing.T) {
	for want, p := range map[string]PassedTier{
		"H100 tier: 0 of 16 free — 12 allocated, 4 tainted gpu.rota.dev/unhealthy": {Name: "H100", Need: 4, Matching: 16, Allocated: 12,
			Tainted: map[string]int{"gpu.rota.dev/unhealthy": 4}},
		"H100 tier: 2 of 8 free — 2 allocated, 2 reserved by GPUReservation team-a/nightly, 2 on nodes the pod's node selector or affinity excludes": {
			Name: "H100", Need: 4, Matching: 8, Free: 2, LargestFree: 2, Allocated: 2, Reserved: map[string]int{"team-a/nightly": 2}, Excluded: 2},
		"H100 tier: 4 of 8 free, at most 2 on one node — 4 allocated": {Name: "H100", Need: 4, Matching: 8, Free: 4, LargestFree: 2, Allocated: 4},
		"train H100 tier: device class gpu not found":                 {Request: "train", Name: "H100", Need: 1, Problem: "device class gpu not found"},
	} {
		if got := p.Line(); got != want {
			t.Errorf("Line() = %q, want %q", got, want)
		}
	}
}

func TestPassedOverRoundTrip(t *testing.T) {
	in := []PassedTier{{Tier: "1/2", Name: "H100", Need: 4, Matching: 16, Allocated: 12, Tainted: map[string]int{"gpu.rota.dev/unhealthy": 4}}}
	raw, err := EncodePassedOver(in)
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{gpuv1.PassedOverAnnotation: raw}}}
	out, ok := PassedOver(pod)
	if !ok || len(out) != 1 || out[0].Line() != in[0].Line() {
		t.Errorf("PassedOver = %+v, %v; want %+v", out, ok, in)
	}
	pod.Annotations[gpuv1.PassedOverAnnotation] = "{not json"
	if _, ok := PassedOver(pod); ok {
		t.Error("a malformed annotation parsed")
	}
}
