package waits

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// h200Slice publishes one H200 shared by memory: 143771Mi, a claim that
// asks nothing takes all of it, at least 1Mi otherwise.
func h200Slice() *resourceapi.ResourceSlice {
	mem := resource.MustParse("143771Mi")
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "h200-0"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "gpu.rota.dev", NodeName: ptr.To("h200-0"),
			Pool: resourceapi.ResourcePool{Name: "h200-0", ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{
				Name:                     "gpu-0",
				AllowMultipleAllocations: ptr.To(true),
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {
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

func memTier(q string) gpupool.Tier {
	if q == "" {
		return gpupool.Tier{Name: "gpu", Count: 1}
	}
	return gpupool.Tier{Name: "gpu", Count: 1, Capacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(q)}}
}

// A claim result's consumed capacity counts when the pool is built from
// claims alone (kubectl rota pool), so a full shared GPU is not counted free
// and the wait is InsufficientCapacity, not fragmentation.
func TestFullSharedGPUIsInsufficientCapacity(t *testing.T) {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: "gpu.rota.dev", Pool: "h200-0", Device: "gpu-0",
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("140000Mi")},
			}},
		}}},
	}
	p := gpupool.NewPool([]*resourceapi.ResourceSlice{h200Slice()}, []*resourceapi.ResourceClaim{claim}, nil)
	r := gpupool.Request{Name: "gpu", Tiers: []gpupool.Tier{memTier("8Gi")}}
	tc := CountTier(t.Context(), p, &gpupool.Matcher{}, r, 0, 0, nil)
	if tc.Free["h200-0"] != 0 || tc.Matching["h200-0"] != 1 {
		t.Fatalf("free %v of matching %v, want 0 of 1", tc.Free, tc.Matching)
	}
	v := Classify(Attempt{Requests: [][]TierCounts{{tc}}, DeviceConstraintNodes: []string{"h200-0"}})
	if v.Reason != InsufficientCapacity {
		t.Errorf("reason %s (%s), want %s", v.Reason, v.Message, InsufficientCapacity)
	}
}
