package gpupool

import (
	"cmp"
	"context"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// NodeRank is how well one node suits a pod, as the Tiering plugin ranks
// nodes (docs/tiering.md): by tier, then fit, then name. The capacity
// preview ranks nodes the same way, so that what it predicts is what the
// scheduler does.
type NodeRank struct {
	Node string
	// Tier is the sum over the pod's ranked requests of the index of the
	// subrequest the allocator picks on this node (0 = every request gets
	// its first choice). Lower is better.
	Tier int
	// Stranded counts the free, untainted devices on the node that match
	// the chosen subrequests and stay unused after this placement. Lower
	// is better: filling a partly used node keeps whole nodes free.
	Stranded int
	// Feasible is false when the allocator found no allocation here.
	Feasible bool
}

// CompareRanks is the documented total order: feasible before infeasible,
// lower tier, fewer stranded devices, then node name. Node names are
// unique, so no two nodes compare equal.
func CompareRanks(a, b NodeRank) int {
	if a.Feasible != b.Feasible {
		if a.Feasible {
			return -1
		}
		return 1
	}
	return cmp.Or(
		cmp.Compare(a.Tier, b.Tier),
		cmp.Compare(a.Stranded, b.Stranded),
		strings.Compare(a.Node, b.Node),
	)
}

// FreeMatchingFunc counts a node's free devices that one tier (the
// subrequest ref of a request) accepts.
type FreeMatchingFunc func(ref string, tier Tier) (int, error)

// RankAllocation ranks node for an allocation the allocator found:
// results are the claims' allocation results, in the order of claims;
// requests are the requests that rank (Tiering ranks by the tiered ones).
// Each request adds the index of the tier its devices came from, and the
// free matching devices of that tier the allocation leaves unused.
func RankAllocation(node string, claims []*resourceapi.ResourceClaim, results []resourceapi.AllocationResult,
	requests []Request, freeMatching FreeMatchingFunc) (NodeRank, error) {
	r := NodeRank{Node: node, Feasible: true}
	for ci, claim := range claims {
		used := map[string]int{} // subrequest ref -> devices granted
		for _, res := range results[ci].Devices.Results {
			used[res.Request]++
		}
		for _, req := range requests {
			if req.Claim != claim {
				continue
			}
			for ti, tier := range req.Tiers {
				ref := req.Ref(ti)
				n, ok := used[ref]
				if !ok {
					continue
				}
				r.Tier += ti
				free, err := freeMatching(ref, tier)
				if err != nil {
					return r, err
				}
				r.Stranded += max(free-n, 0)
			}
		}
	}
	return r, nil
}

// CountFreeMatching counts the devices that free reports free, that no
// untolerated NoSchedule/NoExecute taint blocks, and that m accepts.
func CountFreeMatching(ctx context.Context, devices []NodeDevice, free func(structured.DeviceID) bool,
	m *Matcher, tolerations []resourceapi.DeviceToleration) (int, error) {
	n := 0
	for _, nd := range devices {
		if !free(nd.ID) || BlockingTaint(nd.Device, tolerations) != nil {
			continue
		}
		failing, err := m.FirstFailing(ctx, nd.ID.Driver.String(), nd.Device)
		if err != nil {
			return 0, err
		}
		if failing == "" {
			n++
		}
	}
	return n, nil
}
