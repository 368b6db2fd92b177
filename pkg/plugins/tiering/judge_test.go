package tiering

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpupool/gpupooltest"
)

// TestJudgeSharedGPUs judges a node published with consumable memory
// (--consumable-memory): gpu-0 held by a reservation, gpu-1 filled by
// another claim. A shared GPU counts as free only with room for the tier,
// so the reservation, not "claim constraints", explains the node.
func TestJudgeSharedGPUs(t *testing.T) {
	slice := gpupooltest.SharedH200Slice()
	gpu1 := slice.Spec.Devices[0]
	gpu1.Name = "gpu-1"
	slice.Spec.Devices = append(slice.Spec.Devices, gpu1)
	slice.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: gpuv1.ReservedTaintKey, Value: "team-a.serving", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	full := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "filler"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: gpuv1.DriverName, Pool: "h200-0", Device: "gpu-1", ShareID: ptr.To(types.UID("s1")),
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{gpuv1.CapacityMemory: resource.MustParse("143771Mi")},
			}},
		}}},
	}
	tests := map[string]struct {
		claims    []*resourceapi.ResourceClaim
		tier      gpupool.Tier
		namespace string
		want      string
	}{
		"non-member, the other GPU full": {
			claims: []*resourceapi.ResourceClaim{full}, tier: gpupool.Tier{Count: 1}, namespace: "team-a",
			want: "reserved by GPUReservation team-a/serving",
		},
		"another namespace's pod, the other GPU full": {
			claims: []*resourceapi.ResourceClaim{full}, tier: gpupool.Tier{Count: 1}, namespace: "team-b",
			want: "reserved by a GPUReservation of another namespace",
		},
		"member, the other GPU full": {
			claims: []*resourceapi.ResourceClaim{full},
			tier: gpupool.Tier{Count: 1, Tolerations: []resourceapi.DeviceToleration{{
				Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual, Value: "team-a.serving", Effect: resourceapi.DeviceTaintEffectNoSchedule,
			}}},
			want: "",
		},
		"non-member, the other GPU free": {tier: gpupool.Tier{Count: 1}, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pool := gpupool.NewPool([]*resourceapi.ResourceSlice{slice}, tc.claims, nil)
			c := deviceCounts{namespace: tc.namespace}
			for _, d := range pool.ByNode["h200-0"] {
				c.add(d, tc.tier)
			}
			if got := c.verdict(tc.tier).reason; got != tc.want {
				t.Errorf("reason %q, want %q (counts %+v)", got, tc.want, c)
			}
		})
	}
}
