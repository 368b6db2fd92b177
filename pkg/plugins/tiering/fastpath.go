package tiering

import (
	"context"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
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
// shape the fast path ranks exactly.
func simpleClaimShape(claims []*resourceapi.ResourceClaim) bool {
	if len(claims) != 1 {
		return false
	}
	spec := claims[0].Spec.Devices
	if len(spec.Constraints) != 0 || len(spec.Requests) != 1 {
		return false
	}
	req := spec.Requests[0]
	if req.Exactly != nil || len(req.FirstAvailable) == 0 {
		return false
	}
	for _, sub := range req.FirstAvailable {
		if sub.AllocationMode != resourceapi.DeviceAllocationModeExactCount || sub.Capacity != nil {
			return false
		}
	}
	return true
}

// simpleDevice reports whether the allocator treats d as a plain, whole
// device that is either free or allocated, with nothing else to consider.
func simpleDevice(d *resourceapi.Device) bool {
	return len(d.ConsumesCounters) == 0 &&
		(d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations) &&
		(d.BindsToNode == nil || !*d.BindsToNode) &&
		len(d.BindingConditions) == 0 && len(d.BindingFailureConditions) == 0 &&
		d.NodeName == nil && d.NodeSelector == nil && (d.AllNodes == nil || !*d.AllNodes)
}

// markComplexNodes records in v the nodes whose devices the fast path
// cannot rank: a device that is not simple, a pool whose slices are from
// more than one generation or not all present (the allocator then reasons
// about the pool as a whole), or a repeated device name.
func (v *sliceView) markComplexNodes() {
	type poolKey struct{ driver, pool string }
	type poolSeen struct {
		generation int64
		want       int64
		slices     int64
		mixed      bool
	}
	pools := map[string]map[poolKey]*poolSeen{}
	v.complexNodes = map[string]bool{}
	for _, slice := range v.slices {
		if slice.Spec.NodeName == nil {
			continue
		}
		node := *slice.Spec.NodeName
		if pools[node] == nil {
			pools[node] = map[poolKey]*poolSeen{}
		}
		k := poolKey{slice.Spec.Driver, slice.Spec.Pool.Name}
		p := pools[node][k]
		if p == nil {
			p = &poolSeen{generation: slice.Spec.Pool.Generation, want: slice.Spec.Pool.ResourceSliceCount}
			pools[node][k] = p
		}
		if p.generation != slice.Spec.Pool.Generation || p.want != slice.Spec.Pool.ResourceSliceCount {
			p.mixed = true
		}
		p.slices++
		if slice.Spec.PerDeviceNodeSelection != nil && *slice.Spec.PerDeviceNodeSelection {
			v.complexNodes[node] = true
		}
		for i := range slice.Spec.Devices {
			if !simpleDevice(&slice.Spec.Devices[i]) {
				v.complexNodes[node] = true
			}
		}
	}
	for node, byPool := range pools {
		for _, p := range byPool {
			if p.mixed || p.slices != p.want {
				v.complexNodes[node] = true
			}
		}
		seen := map[string]bool{}
		for _, nd := range v.byNode[node] {
			if seen[nd.id.String()] {
				v.complexNodes[node] = true
			}
			seen[nd.id.String()] = true
		}
	}
}

// fastPathFor reports whether node can be ranked by counting.
func (inv *inventory) fastPathFor(s *preFilterState, node string) bool {
	return s.simple && len(inv.sharedSlices) == 0 && !inv.complexNodes[node]
}

// rankByCounting ranks node for a simple claim: the first tier with enough
// free matching devices is the one the allocator would pick.
func (pl *Tiering) rankByCounting(ctx context.Context, s *preFilterState, inv *inventory, node string, matchers *sync.Map) (nodeRank, error) {
	r := nodeRank{Node: node}
	req := s.requests[0]
	for ti, tier := range req.tiers {
		free, err := pl.freeMatching(ctx, inv, node, req.name+"/"+tier.name, tier, matchers)
		if err != nil {
			return r, err
		}
		if int64(free) >= tier.count {
			r.Feasible = true
			r.Tier = ti
			r.Stranded = free - int(tier.count)
			return r, nil
		}
	}
	return r, nil
}
