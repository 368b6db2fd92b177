package tiering

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// Tier-aware pruning (docs/tiering.md, "Pruning"). For a pod whose claim
// has the fast path's shape, PreFilter ranks every node by counting
// (fastpath.go: exact, no allocator, selector results cached per device).
// Tiering's Filter runs first among the Filter plugins. The first time it
// meets a node that can give only a lower tier than the best one some node
// can give, it looks for a witness: a node of the best tier on which every
// Filter plugin passes (the framework's own RunFilterPlugins on the
// cycle's state). With a witness, the node is rejected there and then, so
// no other Filter plugin, DynamicResources included, visits it; without
// one, the witness search goes on to the next tier, and nodes of the tier
// that has one pass. Only when no tier has a witness does every node go
// through the filters, exactly as without pruning.
//
// Placements do not change: a node is rejected only when a node of a
// strictly better tier is feasible, and the placement contract (score.go)
// orders feasible nodes by tier first, so a rejected node could never have
// been chosen. The fallback to the next tier happens in the same
// scheduling cycle: no failed attempt, no backoff, and the placement event
// names the passed-over tiers as before.
//
// Why not a PreFilterResult: the framework filters only the nodes a
// PreFilterResult names, and when they all fail, the attempt fails — a
// FailedScheduling event, a backoff, and a retry that must remember which
// tier it pruned to. PreFilter cannot find a witness either: Filter plugins
// may only run once every PreFilter has, and the framework records which of
// them skipped only after the last one.

// maxPruneProbes bounds the failed witness probes of one cycle. Past it the
// cycle gives up pruning (every node is filtered, as without pruning): a
// cluster whose better tiers are all blocked by other filters should not
// pay for filtering those nodes twice.
const maxPruneProbes = 64

// pruneState is PreFilter's ranking of the nodes it could rank by counting,
// and, once a Filter call needed it, the witness. Shared by every Filter
// call of the cycle and its clones.
type pruneState struct {
	// ranks are the nodes ranked by counting. A node missing here (not
	// plain, or added since) is never rejected by pruning.
	ranks map[string]nodeRank
	// order are the feasible ranked nodes, best first (less).
	order []nodeRank

	once sync.Once
	// witnessTier is the tier of the first feasible node that passed every
	// Filter plugin, -1 when none did (then nothing is pruned).
	witnessTier int
	witness     string
	// probes counts the Filter plugin runs of the witness search.
	probes int
}

// probingKey marks the context of the witness search's own Filter runs: in
// them, Tiering's Filter passes every node.
type probingKey struct{}

// prunable reports whether the pod may be pruned at all: pruning is on, the
// claims have the fast path's shape, no slice is shared between nodes, the
// pod is not nominated to a node (the framework then tries that node alone
// first, and would take it whatever its tier), and its claim tolerates no
// GPUReservation (a member is limited to its reservation's node by the
// Reservation plugin's PreFilterResult: there is nothing to prune, and the
// witness search would filter nodes the framework never does).
func (pl *Tiering) prunable(s *preFilterState, inv *gpupool.Inventory, pod *v1.Pod) bool {
	if pl.args.DisablePruning || !s.simple || inv.HasSharedSlices() || pod.Status.NominatedNodeName != "" {
		return false
	}
	for _, r := range s.requests {
		for _, t := range r.Tiers {
			for _, tol := range t.Tolerations {
				if tol.Key == gpuv1.ReservedTaintKey {
					return false
				}
			}
		}
	}
	return true
}

// preparePruning sets s.prune when the pod may be pruned.
func (pl *Tiering) preparePruning(ctx context.Context, cs fwk.CycleState, s *preFilterState, pod *v1.Pod, nodes []fwk.NodeInfo) error {
	inv, err := pl.cycleInventory(ctx, cs)
	if err != nil {
		return err
	}
	if !pl.prunable(s, inv, pod) {
		return nil
	}
	p, err := pl.rankForPruning(ctx, s, inv, nodes)
	if err != nil {
		return fmt.Errorf("rank nodes for pruning: %w", err)
	}
	s.prune = p
	return nil
}

// rankForPruning ranks by counting every node that can be ranked so.
func (pl *Tiering) rankForPruning(ctx context.Context, s *preFilterState, inv *gpupool.Inventory, nodes []fwk.NodeInfo) (*pruneState, error) {
	ranks := make([]nodeRank, len(nodes))
	known := make([]bool, len(nodes))
	errs := make([]error, len(nodes))
	var matchers sync.Map
	pl.handle.Parallelizer().Until(ctx, len(nodes), func(i int) {
		node := nodes[i].Node()
		if node == nil || !inv.Plain(node.Name) {
			return
		}
		known[i] = true
		ranks[i], errs[i] = pl.rankByCounting(ctx, s, inv, node.Name, &matchers)
	}, Name)
	p := &pruneState{ranks: make(map[string]nodeRank, len(nodes)), witnessTier: -1}
	for i, r := range ranks {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if !known[i] {
			continue
		}
		p.ranks[r.Node] = r
		if r.Feasible {
			p.order = append(p.order, r)
		}
	}
	slices.SortFunc(p.order, less)
	return p, nil
}

// Filter implements fwk.FilterPlugin: it rejects a node that can give only
// a lower tier than a node known to pass every filter, and passes every
// other node. The profile runs it before every other Filter plugin.
func (pl *Tiering) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if ctx.Value(probingKey{}) != nil {
		return nil
	}
	s, err := getPreFilterState(cs)
	if err != nil || s.prune == nil || nodeInfo.Node() == nil {
		return nil //nolint:nilerr // not a pod Tiering prunes
	}
	p := s.prune
	r, known := p.ranks[nodeInfo.Node().Name]
	if !known || (r.Feasible && len(p.order) > 0 && r.Tier <= p.order[0].Tier) {
		// Unknown, or as good as the best any node offers: never pruned,
		// and no witness needed.
		return nil
	}
	p.once.Do(func() { pl.findWitness(ctx, cs, pod, p) })
	if p.witnessTier < 0 || (r.Feasible && r.Tier <= p.witnessTier) {
		return nil
	}
	pl.metrics.prunedNodes.Inc()
	// Unresolvable: preemption on this node could not make it the choice
	// either, a better tier being free elsewhere.
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("a better tier fits on node %s", p.witness))
}

// findWitness runs every Filter plugin on the ranked feasible nodes, best
// first, until one passes; a node with nominated pods is skipped (the
// framework filters it with those pods added, which this search does not).
// It gives up after maxPruneProbes failures.
func (pl *Tiering) findWitness(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, p *pruneState) {
	logger := klog.FromContext(ctx)
	probeCtx := context.WithValue(ctx, probingKey{}, true)
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	failed := 0
	for _, r := range p.order {
		if failed >= maxPruneProbes {
			logger.V(4).Info("Tier pruning gave up: no witness among the best-ranked nodes", "pod", klog.KObj(pod), "probes", p.probes)
			return
		}
		if len(pl.handle.NominatedPodsForNode(r.Node)) > 0 {
			continue
		}
		ni, err := lister.Get(r.Node)
		if err != nil {
			continue
		}
		p.probes++
		if st := pl.handle.RunFilterPlugins(probeCtx, cs, pod, ni); st.IsSuccess() {
			p.witnessTier, p.witness = r.Tier, r.Node
			logger.V(5).Info("Tier pruning witness", "pod", klog.KObj(pod), "node", r.Node, "tier", r.Tier, "probes", p.probes)
			return
		}
		failed++
	}
}
