package tiering

import (
	"context"
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// The fast path ranks a node without running the structured allocator, for
// the claim shape nearly every tiered pod has: one unallocated claim with
// one firstAvailable request, every subrequest ExactCount without capacity
// requests, and no constraints. For that shape the allocator's answer is
// fully determined by counting: it walks the subrequests in order and takes
// the first whose class and selectors accept at least Count of the node's
// free, untolerated-taint-free devices. Counting those devices is exactly
// what the stranded-device metric needs anyway, and the selector results
// are cached per device, so a node costs a few map lookups instead of an
// allocator run.
//
// Whatever the fast path cannot prove equal — several claims or requests
// competing for the same devices, matchAttribute constraints, consumable
// capacity, partitionable or node-binding devices, slices shared between
// nodes, pools being updated — goes to the allocator. TestFastPathAgrees
// checks the two against each other.

// simpleClaimShape reports whether the pod's unallocated claims have the
// shape the fast path ranks exactly (gpupool.SimpleClaimShape).
func simpleClaimShape(claims []*resourceapi.ResourceClaim) bool {
	return gpupool.SimpleClaimShape(claims)
}

// fastPathFor reports whether node can be ranked by counting.
func fastPathFor(s *preFilterState, inv *gpupool.Inventory, node string) bool {
	return s.simple && !inv.HasSharedSlices() && inv.Plain(node)
}

// rankByCounting ranks node for a simple claim: the first tier with enough
// free matching devices is the one the allocator would pick.
func (pl *Tiering) rankByCounting(ctx context.Context, s *preFilterState, inv *gpupool.Inventory, node string, matchers *sync.Map) (nodeRank, error) {
	r := nodeRank{Node: node}
	req := s.requests[0]
	for ti, tier := range req.Tiers {
		free, err := pl.freeMatching(ctx, inv, node, req.Ref(ti), tier, matchers)
		if err != nil {
			return r, err
		}
		if int64(free) >= tier.Count {
			r.Feasible = true
			r.Tier = ti
			r.Stranded = free - int(tier.Count)
			return r, nil
		}
	}
	return r, nil
}
