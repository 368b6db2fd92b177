// Package gpupooltest builds ResourceSlices for tests of the pool model and
// of the packages that read it.
package gpupooltest

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// SharedH200Slice publishes one H200 on node h200-0, shared by memory:
// 143771Mi, a claim that asks nothing takes all of it, at least 1Mi
// otherwise (a node run with --consumable-memory, docs/driver.md).
func SharedH200Slice() *resourceapi.ResourceSlice {
	mem := resource.MustParse("143771Mi")
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "h200-0"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: gpuv1.DriverName, NodeName: ptr.To("h200-0"),
			Pool: resourceapi.ResourcePool{Name: "h200-0", ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{
				Name:                     "gpu-0",
				AllowMultipleAllocations: ptr.To(true),
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{gpuv1.CapacityMemory: {
					Value: mem,
					RequestPolicy: &resourceapi.CapacityRequestPolicy{
						Default:    ptr.To(mem),
						ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Mi"))},
					},
				}},
			}},
		},
	}
}
