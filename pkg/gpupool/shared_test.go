package gpupool

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/gpupool/gpupooltest"
)

func memTier(q string) Tier {
	if q == "" {
		return Tier{Name: "gpu", Count: 1}
	}
	return Tier{Name: "gpu", Count: 1, Capacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(q)}}
}

// A shared GPU is free for a claim only while its remaining memory covers
// what the claim consumes, counting in-flight allocations; a claim that
// asks for no memory consumes the whole GPU.
func TestSharedDeviceFreeFor(t *testing.T) {
	id := structured.MakeDeviceID("gpu.rota.dev", "h200-0", "gpu-0")
	for name, tc := range map[string]struct {
		consumed string // "" = nothing allocated
		tier     Tier
		want     bool
	}{
		"unused, whole GPU":          {tier: memTier(""), want: true},
		"unused, a share":            {tier: memTier("6Gi"), want: true},
		"in use, whole GPU":          {consumed: "60Gi", tier: memTier(""), want: false},
		"in use, share fits":         {consumed: "60Gi", tier: memTier("70Gi"), want: true},
		"in use, share does not fit": {consumed: "100000Mi", tier: memTier("43772Mi"), want: false},
		"in use, share fits exactly": {consumed: "100000Mi", tier: memTier("43771Mi"), want: true},
		"below the policy's minimum": {consumed: "143770Mi", tier: memTier("1Ki"), want: true},
		"full, even the minimum":     {consumed: "143771Mi", tier: memTier("1Ki"), want: false},
	} {
		t.Run(name, func(t *testing.T) {
			p := NewPool([]*resourceapi.ResourceSlice{gpupooltest.SharedH200Slice()}, nil, nil)
			if tc.consumed != "" {
				p.setConsumed(structured.ConsumedCapacityCollection{id: {"memory": ptr.To(resource.MustParse(tc.consumed))}})
			}
			if got := p.ByID[id].FreeFor(tc.tier); got != tc.want {
				t.Errorf("FreeFor = %v, want %v", got, tc.want)
			}
		})
	}
}

// A claim result's consumed capacity counts when the pool is built from
// claims alone (kubectl rota pool), so a full shared GPU is not free.
func TestClaimConsumedCapacity(t *testing.T) {
	p := NewPool([]*resourceapi.ResourceSlice{gpupooltest.SharedH200Slice()}, []*resourceapi.ResourceClaim{sharedClaim("140000Mi")}, nil)
	d := p.ByID[structured.MakeDeviceID("gpu.rota.dev", "h200-0", "gpu-0")]
	if d.FreeFor(memTier("8Gi")) {
		t.Errorf("FreeFor(8Gi) = true with 140000Mi of 143771Mi consumed")
	}
	if want := (types.NamespacedName{Namespace: "ml", Name: "c"}); d.HolderClaim != want || len(d.Allocations) != 1 || d.Allocations[0].Claim != want {
		t.Errorf("holder %v, allocations %v, want claim %v", d.HolderClaim, d.Allocations, want)
	}
}

func sharedClaim(mem string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: "gpu.rota.dev", Pool: "h200-0", Device: "gpu-0",
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)},
			}},
		}}},
	}
}
