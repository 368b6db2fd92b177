package poolreport

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rotav1alpha1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func TestRows(t *testing.T) {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	dev := func(name, model, uuid string, shared bool, taints ...resourceapi.DeviceTaint) resourceapi.Device {
		d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": str(model), "uuid": str(uuid)},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("143771Mi")}}, Taints: taints}
		if shared {
			d.AllowMultipleAllocations = ptr.To(true)
		}
		return d
	}
	slices := []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{
		Driver: "gpu.rota.dev", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1"},
		Devices: []resourceapi.Device{
			dev("gpu-1", "H200", "GPU-b", false, resourceapi.DeviceTaint{Key: "gpu.rota.dev/unhealthy", Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}),
			dev("gpu-0", "H200", "GPU-a", true),
		},
	}}}
	claim := func(ns, name, pod, mem string) resourceapi.ResourceClaim {
		return resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: resourceapi.ResourceClaimStatus{
				Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Driver: "gpu.rota.dev", Pool: "n1", Device: "gpu-0", Request: "gpu",
					ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)},
				}}}},
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod}},
			},
		}
	}
	claims := []resourceapi.ResourceClaim{claim("serving", "a-gpu", "a-0", "40000Mi"), claim("serving", "c-gpu", "c-0", "30000Mi")}
	resv := []rotav1alpha1.GPUReservation{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "h200-pool"},
		Status:     rotav1alpha1.GPUReservationStatus{BudgetMiBPerGPU: 136582, Devices: []rotav1alpha1.ReservedDevice{{UUID: "GPU-a"}}},
	}}
	want := []GPU{
		{Node: "n1", Device: "gpu-0", Model: "H200", UUID: "GPU-a", Health: "Healthy", Reservation: "serving/h200-pool",
			Holders: []string{"serving/a-0", "serving/c-0"}, Tenants: []string{"serving"}, Shared: true, VRAMUsedMiB: 70000, VRAMMiB: 136582},
		{Node: "n1", Device: "gpu-1", Model: "H200", UUID: "GPU-b", Health: "Unhealthy(gpu.rota.dev/unhealthy xid-79)"},
	}
	if diff := cmp.Diff(want, Rows(slices, claims, resv, "gpu.rota.dev")); diff != "" {
		t.Errorf("Rows (-want +got):\n%s", diff)
	}
}
