package preview

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// placer places the pods of one Check, one after the other, on top of what
// the input's claims and the pods placed before hold.
type placer struct {
	p          *Previewer
	nodes      []*v1.Node
	nodeSlices map[string][]*resourceapi.ResourceSlice
	shared     []*resourceapi.ResourceSlice
	index      *gpupool.Slices
	classes    ClassLister
	taken      *taken
	// matchers are the compiled tiers, by class and selectors.
	matchers map[string]*gpupool.Matcher
}

func newPlacer(p *Previewer, in Inputs) *placer {
	t := newTaken()
	for _, c := range in.Claims {
		if c.Status.Allocation != nil {
			t.add(c.Status.Allocation.Devices.Results)
		}
	}
	nodeSlices, shared := slicesByNode(in.Slices)
	return &placer{p: p, nodes: schedulableNodes(in.Nodes), nodeSlices: nodeSlices, shared: shared,
		index: p.slices.Get(in.Slices), classes: in.Classes, taken: t, matchers: map[string]*gpupool.Matcher{}}
}

// candidate is one node's allocation for the pod being placed.
type candidate struct {
	rank    gpupool.NodeRank
	results []resourceapi.AllocationResult
}

// place puts the claims of one pod on the best-ranked node where the
// allocator gives them devices, marks those devices taken and says where
// they went; a pod that fits nowhere gets the reason instead.
func (pl *placer) place(ctx context.Context, claims []*resourceapi.ResourceClaim) (Placement, error) {
	best, err := pl.best(ctx, claims, true)
	if err == nil && best != nil && best.results == nil {
		// Counting chose the node; the allocator picks the devices there.
		// Should it disagree, every node is asked.
		best, err = pl.try(ctx, pl.node(best.rank.Node), claims, rankedRequests(claims))
		if err == nil && best == nil {
			best, err = pl.best(ctx, claims, false)
		}
	}
	if err != nil {
		return Placement{}, err
	}
	if best == nil {
		shortage, err := pl.shortage(ctx, claims)
		return Placement{Shortage: shortage}, err
	}
	out := Placement{Node: best.rank.Node}
	for ci, claim := range claims {
		alloc := best.results[ci]
		pl.taken.add(alloc.Devices.Results)
		placed := claim.DeepCopy()
		placed.Status.Allocation = &alloc
		out.Claims = append(out.Claims, placed)
		out.Devices = append(out.Devices, pl.devices(ci, claim, alloc.Devices.Results)...)
	}
	return out, nil
}

// best ranks every node for the claims and returns the first, nil when
// none fits. With count, a node the allocator's answer is known on by
// counting (the fast path Tiering takes: a countable claim shape, a plain
// node, no shared slices) is ranked without running the allocator, and
// the candidate then has no results.
func (pl *placer) best(ctx context.Context, claims []*resourceapi.ResourceClaim, count bool) (*candidate, error) {
	ranked := rankedRequests(claims)
	count = count && gpupool.CountableClaimShape(claims) && !pl.index.HasSharedSlices()
	var best *candidate
	for _, node := range pl.nodes {
		var c *candidate
		var err error
		if count && pl.index.Plain(node.Name) {
			c, err = pl.count(ctx, node.Name, ranked[0])
		} else {
			c, err = pl.try(ctx, node, claims, ranked)
		}
		if err != nil {
			return nil, err
		}
		if c != nil && (best == nil || gpupool.CompareRanks(c.rank, best.rank) < 0) {
			best = c
		}
	}
	return best, nil
}

// count ranks node for a countable claim's one request: its first tier
// with enough free matching devices is the one the allocator picks.
func (pl *placer) count(ctx context.Context, node string, req gpupool.Request) (*candidate, error) {
	for ti, tier := range req.Tiers {
		m, err := pl.matcher(tier)
		if err != nil {
			return nil, err
		}
		free, err := gpupool.CountFreeMatching(ctx, pl.index.ByNode[node], pl.free, m, tier.Tolerations)
		if err != nil {
			return nil, err
		}
		if int64(free) >= tier.Count {
			return &candidate{rank: gpupool.NodeRank{Node: node, Tier: ti, Stranded: free - int(tier.Count), Feasible: true}}, nil
		}
	}
	return nil, nil
}

func (pl *placer) node(name string) *v1.Node {
	for _, n := range pl.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// try runs the allocator for the claims on node and ranks the answer; nil
// when the node cannot take them.
func (pl *placer) try(ctx context.Context, node *v1.Node, claims []*resourceapi.ResourceClaim, ranked []gpupool.Request) (*candidate, error) {
	local := pl.nodeSlices[node.Name]
	if len(local) == 0 && len(pl.shared) == 0 {
		return nil, nil
	}
	nodeSlices := append(append(make([]*resourceapi.ResourceSlice, 0, len(pl.shared)+len(local)), pl.shared...), local...)
	state := structured.AllocatedState{
		AllocatedDevices:         pl.taken.dedicated,
		AllocatedSharedDeviceIDs: pl.taken.shares,
		AggregatedCapacity:       pl.taken.capacity.Clone(),
	}
	alloc, err := structured.NewAllocator(ctx, pl.p.features, state, pl.classes, nodeSlices, pl.p.celCache)
	if err != nil {
		return nil, fmt.Errorf("create allocator: %w", err)
	}
	results, err := alloc.Allocate(ctx, node, claims)
	if err != nil {
		return nil, fmt.Errorf("preview allocation on node %s: %w", node.Name, err)
	}
	if len(results) != len(claims) {
		return nil, nil
	}
	rank, err := gpupool.RankAllocation(node.Name, claims, results, ranked, func(_ string, tier gpupool.Tier) (int, error) {
		m, err := pl.matcher(tier)
		if err != nil {
			return 0, err
		}
		return gpupool.CountFreeMatching(ctx, pl.index.ByNode[node.Name], pl.free, m, tier.Tolerations)
	})
	if err != nil {
		return nil, fmt.Errorf("rank node %s: %w", node.Name, err)
	}
	return &candidate{rank: rank, results: results}, nil
}

// rankedRequests are the requests Tiering ranks a pod's nodes by: its
// tiered (firstAvailable) requests. A pod without any is not Tiering's
// business; the preview then ranks by every request, which puts it where
// it strands the fewest devices (best fit).
func rankedRequests(claims []*resourceapi.ResourceClaim) []gpupool.Request {
	var tiered, all []gpupool.Request
	for _, c := range claims {
		tiered = append(tiered, gpupool.TieredRequests(c)...)
		all = append(all, gpupool.ClaimRequests(c)...)
	}
	if len(tiered) > 0 {
		return tiered
	}
	return all
}

func (pl *placer) free(id structured.DeviceID) bool { return !pl.taken.dedicated.Has(id) }

// matcher compiles a tier's class and selectors once per placer.
func (pl *placer) matcher(tier gpupool.Tier) (*gpupool.Matcher, error) {
	key := tier.Class + "\x00" + strings.Join(tier.Selectors, "\x00")
	if m, ok := pl.matchers[key]; ok {
		return m, nil
	}
	m, err := gpupool.NewMatcher(pl.classes, pl.p.celCache, pl.p.matches, tier)
	if err != nil {
		return nil, err
	}
	pl.matchers[key] = m
	return m, nil
}

// devices describes the devices an allocation gives the claim.
func (pl *placer) devices(ci int, claim *resourceapi.ResourceClaim, results []resourceapi.DeviceRequestAllocationResult) []Device {
	reqs := gpupool.ClaimRequests(claim)
	out := make([]Device, 0, len(results))
	for _, r := range results {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		d := Device{ID: id, Claim: ci, Request: r.Request, Tiers: 1}
		if dev, ok := pl.index.ByID[id]; ok {
			d.Model = gpupool.StringAttribute(dev, r.Driver, gpuv1.AttributeModel)
		}
		for _, req := range reqs {
			for ti := range req.Tiers {
				if req.Ref(ti) == r.Request {
					d.Request, d.Tier, d.Tiers, d.TierName = req.Name, ti, len(req.Tiers), req.Tiers[ti].Name
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// shortage says why no node fits the claims: by count when some request
// finds, in no tier, as many free devices as it needs in the whole pool;
// else by fragmentation.
func (pl *placer) shortage(ctx context.Context, claims []*resourceapi.ResourceClaim) (string, error) {
	all := make([]gpupool.NodeDevice, 0, len(pl.index.ByID))
	for id, d := range pl.index.ByID {
		all = append(all, gpupool.NodeDevice{ID: id, Device: d})
	}
	for _, c := range claims {
		for _, req := range gpupool.ClaimRequests(c) {
			enough := false
			for _, tier := range req.Tiers {
				m, err := pl.matcher(tier)
				if err != nil {
					return "", err
				}
				free, err := gpupool.CountFreeMatching(ctx, all, pl.free, m, tier.Tolerations)
				if err != nil {
					return "", err
				}
				if int64(free) >= tier.Count {
					enough = true
					break
				}
			}
			if !enough {
				return ShortageCount, nil
			}
		}
	}
	return ShortageFragmentation, nil
}
