package defrag

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// A reservation's rule shows as the device's rota.dev/reserved taint, as
// the scheduler sees it; the listed slice itself is not changed, and other
// drivers' slices are left out.
func TestWithReservations(t *testing.T) {
	f := newFixture(map[string]int{"n1": 2})
	other := resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "other.example.com"}}
	listed := []resourceapi.ResourceSlice{*f.slices[0], other}
	reserved := map[structured.DeviceID]string{structured.MakeDeviceID(gpuv1.DriverName, "n1", "gpu-1"): "team-a.train"}
	got := withReservations(listed, reserved)
	if len(got) != 1 {
		t.Fatalf("%d slices, want only the driver's", len(got))
	}
	if v := gpupool.ReservedBy(&got[0].Spec.Devices[1]); v != "team-a.train" {
		t.Errorf("gpu-1 reserved by %q, want team-a.train", v)
	}
	if v := gpupool.ReservedBy(&got[0].Spec.Devices[0]); v != "" {
		t.Errorf("gpu-0 reserved by %q, want none", v)
	}
	if len(listed[0].Spec.Devices[1].Taints) != 0 {
		t.Error("the listed slice was changed")
	}
}
