package tiering

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
)

// nodeRank is what Tiering knows about one feasible node. Nodes are ordered
// by tier, then fit, then name (gpupool.CompareRanks); that order is the
// whole placement contract, and the capacity preview ranks by it too.
type nodeRank = gpupool.NodeRank

// less is gpupool.CompareRanks, the documented total order.
func less(a, b nodeRank) int { return gpupool.CompareRanks(a, b) }

// rankScores orders the nodes and gives each a distinct score for the first
// fwk.MaxScore+1 positions: MaxScore for the best node, one less
// for each next one, 0 from position 101 on. Only the best node's score
// has to be unique, because the profile weights Tiering above the sum of
// every other scorer's maximum: the node ranked first always has the
// highest total, so selectHost's random choice among equal totals never
// decides a tiered pod's node.
func rankScores(ranks []nodeRank) map[string]int64 {
	sorted := slices.Clone(ranks)
	slices.SortFunc(sorted, less)
	scores := make(map[string]int64, len(sorted))
	for i, r := range sorted {
		scores[r.Node] = max(fwk.MaxScore-int64(i), fwk.MinScore)
	}
	return scores
}

// preScoreState holds the score of every feasible node. Written once in
// PreScore and only read afterwards, so Clone may share it.
type preScoreState struct {
	scores map[string]int64
	ranks  map[string]nodeRank
}

func (s *preScoreState) Clone() fwk.StateData { return s }

func getPreScoreState(cs fwk.CycleState) (*preScoreState, error) {
	return cyclestate.Read[*preScoreState](cs, preScoreStateKey)
}

// PreScore ranks every feasible node once. It asks the structured
// allocator, built from the shared DRA manager exactly as DynamicResources
// builds it, which devices the node would get: the allocator walks
// firstAvailable in order, so its answer names the best tier the node's
// free, untainted devices satisfy under every selector and constraint.
func (pl *Tiering) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	s, err := getPreFilterState(cs)
	if err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	logger := klog.FromContext(ctx)
	inv, err := pl.cycleInventory(ctx, cs)
	if err != nil {
		return statusError(logger, err)
	}
	ranks := make([]nodeRank, len(nodes))
	errs := make([]error, len(nodes))
	var matchers sync.Map // subrequest ref -> *matcher, shared by the workers
	pl.handle.Parallelizer().Until(ctx, len(nodes), func(i int) {
		if s.prune != nil {
			// PreFilter ranked it already, from the same inventory.
			if r, ok := s.prune.ranks[nodes[i].Node().Name]; ok {
				ranks[i] = r
				return
			}
		}
		ranks[i], errs[i] = pl.rankNode(ctx, s, inv, nodes[i].Node(), &matchers)
	}, Name)
	for _, err := range errs {
		if err != nil {
			return statusError(logger, err, "pod", klog.KObj(pod))
		}
	}
	state := &preScoreState{scores: rankScores(ranks), ranks: make(map[string]nodeRank, len(ranks))}
	for _, r := range ranks {
		state.ranks[r.Node] = r
	}
	cs.Write(preScoreStateKey, state)
	return nil
}

// rankNode computes one node's rank. It is safe for concurrent use.
func (pl *Tiering) rankNode(ctx context.Context, s *preFilterState, inv *gpupool.Inventory, node *v1.Node, matchers *sync.Map) (nodeRank, error) {
	if fastPathFor(s, inv, node.Name) {
		return pl.rankByCounting(ctx, s, inv, node.Name, matchers)
	}
	r := nodeRank{Node: node.Name}
	// The allocator scans every slice it is given on each call. Given only
	// the slices that can offer devices to this node, it finds the same
	// allocation without the cost growing with the cluster.
	allocator, err := structured.NewAllocator(ctx, pl.features, inv.State, pl.dra.DeviceClasses(), inv.SlicesFor(node.Name), pl.caches.CEL)
	if err != nil {
		return r, fmt.Errorf("create allocator: %w", err)
	}
	results, err := allocator.Allocate(ctx, node, s.claims)
	if err != nil || len(results) != len(s.claims) {
		// DynamicResources' Filter decides feasibility and reports errors;
		// here such a node merely ranks last.
		return r, nil //nolint:nilerr // ranked last, reported by DynamicResources
	}
	return gpupool.RankAllocation(node.Name, s.claims, results, s.requests, func(ref string, tier gpupool.Tier) (int, error) {
		return pl.freeMatching(ctx, inv, node.Name, ref, tier, matchers)
	})
}

// freeMatching counts the node's unallocated, untainted devices that a
// tier's class and selectors accept.
func (pl *Tiering) freeMatching(ctx context.Context, inv *gpupool.Inventory, node, ref string, tier gpupool.Tier, matchers *sync.Map) (int, error) {
	var m *gpupool.Matcher
	if v, ok := matchers.Load(ref); ok {
		m = v.(*gpupool.Matcher)
	} else {
		nm, err := pl.matcherFor(tier)
		if err != nil {
			return 0, err
		}
		v, _ = matchers.LoadOrStore(ref, nm)
		m = v.(*gpupool.Matcher)
	}
	return gpupool.CountFreeMatching(ctx, inv.ByNode[node], inv.Free, m, tier.Tolerations)
}

// Score returns the score PreScore computed for the node.
func (pl *Tiering) Score(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := getPreScoreState(cs)
	if err != nil {
		return 0, statusError(klog.FromContext(ctx), err)
	}
	return s.scores[nodeInfo.Node().Name], nil
}

// ScoreExtensions implements fwk.ScorePlugin; scores are already in range.
func (pl *Tiering) ScoreExtensions() fwk.ScoreExtensions { return nil }

// requestTier returns the tier index and count of a "<request>/<sub>"
// result reference within the pod's tiered requests.
func requestTier(s *preFilterState, claim *resourceapi.ResourceClaim, ref string) (req *gpupool.Request, index int, ok bool) {
	for i := range s.requests {
		r := &s.requests[i]
		if r.Claim.UID != claim.UID {
			continue
		}
		for ti := range r.Tiers {
			if r.Ref(ti) == ref {
				return r, ti, true
			}
		}
	}
	return nil, 0, false
}
