package waits

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpupool/gpupooltest"
)

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
	p := gpupool.NewPool([]*resourceapi.ResourceSlice{gpupooltest.SharedH200Slice()}, []*resourceapi.ResourceClaim{claim}, nil)
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
