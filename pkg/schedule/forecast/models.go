package forecast

import (
	"context"
	"fmt"
	"slices"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// pool is the healthy, unreserved devices of the input's slices, and what
// is needed to tell which model a claim asks for.
type pool struct {
	devices  []*gpupool.Device
	capacity map[string]int
	nodes    map[string]map[string]int
	classes  preview.ClassLister
	cel      *cel.Cache
	// matches remembers selector results per device, shared by every load.
	matches *gpupool.MatchCache
}

func newPool(in *Input) *pool {
	p := &pool{capacity: map[string]int{}, nodes: map[string]map[string]int{}, classes: in.Classes, cel: gpupool.NewCELCache(), matches: gpupool.NewMatchCache()}
	gp := gpupool.NewPool(in.Slices, nil, nil)
	for _, d := range gp.Devices() {
		if gpupool.BlockingTaint(d.Device, nil) != nil {
			continue // unhealthy, or held for someone
		}
		p.devices = append(p.devices, d)
		m := d.Model()
		p.capacity[m]++
		if p.nodes[d.Node] == nil {
			p.nodes[d.Node] = map[string]int{}
		}
		p.nodes[d.Node][m]++
	}
	return p
}

// perPod returns the GPUs per model that one pod with these claim specs
// asks for at first choice, and that first-choice model per request
// (keyed by requestKey). Each request counts for the first of its tiers
// that some device of the pool matches (the allocator's firstAvailable
// order), on the model most of the matching devices have; a request
// nothing matches is returned as a note and counts nowhere.
func (p *pool) perPod(ctx context.Context, specs []resourceapi.ResourceClaimSpec) (map[string]int, map[string]string, []string, error) {
	out, prefer := map[string]int{}, map[string]string{}
	var notes []string
	for i := range specs {
		claim := &resourceapi.ResourceClaim{Spec: specs[i]}
		for _, req := range gpupool.ClaimRequests(claim) {
			model, count, err := p.resolve(ctx, req)
			if err != nil {
				return nil, nil, nil, err
			}
			if model == "" && count == 0 {
				notes = append(notes, fmt.Sprintf("request %q matches no healthy GPU of the pool", req.Name))
				continue
			}
			out[model] += count
			prefer[requestKey(i, req.Name)] = model
		}
	}
	return out, prefer, notes, nil
}

// requestKey names request req of a pod's claim-th claim.
func requestKey(claim int, req string) string { return fmt.Sprintf("%d/%s", claim, req) }

// resolve picks the tier of req that the pool can serve and its model.
func (p *pool) resolve(ctx context.Context, req gpupool.Request) (string, int, error) {
	for _, tier := range req.Tiers {
		m, err := gpupool.NewMatcher(p.classes, p.cel, p.matches, tier)
		if err != nil {
			return "", 0, fmt.Errorf("request %q: %w", req.Name, err)
		}
		byModel, byNode := map[string]int{}, map[string]int{}
		for _, d := range p.devices {
			if m.Matches(ctx, d) {
				byModel[d.Model()]++
				byNode[d.Node]++
			}
		}
		if len(byModel) == 0 {
			continue
		}
		count := int(tier.Count)
		if tier.All {
			for _, n := range byNode {
				count = max(count, n)
			}
		}
		return mostCommon(byModel), count, nil
	}
	return "", 0, nil
}

// mostCommon is the key with the largest count, the first by name on a tie.
func mostCommon(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best := keys[0]
	for _, k := range keys[1:] {
		if counts[k] > counts[best] {
			best = k
		}
	}
	return best
}

// allocatedByModel counts the devices the claims hold, per model, and
// names their holders per model ("ns/Pod/name", or the claim when it is
// reserved for no pod).
func (p *pool) allocatedByModel(claims []*resourceapi.ResourceClaim) (map[string]int, map[string][]string) {
	byID := map[structured.DeviceID]*gpupool.Device{}
	for _, d := range p.devices {
		byID[d.ID] = d
	}
	out, holders := map[string]int{}, map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		var names []string
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" {
				names = append(names, c.Namespace+"/Pod/"+r.Name)
			}
		}
		if len(names) == 0 {
			names = []string{c.Namespace + "/ResourceClaim/" + c.Name}
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if d, ok := byID[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]; ok {
				out[d.Model()]++
				holders[d.Model()] = append(holders[d.Model()], names...)
			}
		}
	}
	for m, names := range holders {
		slices.Sort(names)
		holders[m] = slices.Compact(names)
	}
	return out, holders
}

// allocatedByNode counts the devices the claims hold, per node and model.
func (p *pool) allocatedByNode(claims []*resourceapi.ResourceClaim) map[string]map[string]int {
	byID := map[structured.DeviceID]*gpupool.Device{}
	for _, d := range p.devices {
		byID[d.ID] = d
	}
	out := map[string]map[string]int{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if d, ok := byID[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]; ok {
				if out[d.Node] == nil {
					out[d.Node] = map[string]int{}
				}
				out[d.Node][d.Model()]++
			}
		}
	}
	return out
}
