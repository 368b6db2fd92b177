package gpupool

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// Pool is a point-in-time view of the node-local devices and of which are
// allocated (or have an allocation in flight), to which claims and pods.
// In the scheduler it is read from the shared DRA manager, the same inputs
// the allocator sees; tools build it from listed objects with NewPool.
type Pool struct {
	Nodes  []string // sorted
	ByNode map[string][]*Device
	ByID   map[structured.DeviceID]*Device
}

// Snapshot reads the pool from the scheduler's shared DRA manager,
// including what in-flight allocations consume of shared devices. The
// slice index comes from views (see SnapshotInventory).
func Snapshot(ctx context.Context, dra fwk.SharedDRAManager, views *SliceCache) (*Pool, error) {
	inv, err := SnapshotInventory(ctx, dra, views)
	if err != nil {
		return nil, err
	}
	return poolOf(inv, dra)
}

// poolOf builds the pool of an inventory taken from dra, with the claims'
// holders and what in-flight allocations consume of shared devices.
func poolOf(inv *Inventory, dra fwk.SharedDRAManager) (*Pool, error) {
	claims, err := dra.ResourceClaims().List()
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	p := newPool(inv.Slices, claims, inv.Allocated)
	p.setConsumed(inv.State.AggregatedCapacity)
	return p, nil
}

// NewPool builds a pool from slices, claims (for holders) and the set of
// allocated device IDs (which includes in-flight allocations; nil when the
// claims are all there is).
func NewPool(slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim, allocated sets.Set[structured.DeviceID]) *Pool {
	return newPool(NewSlices(slices), claims, allocated)
}

func newPool(v *Slices, claims []*resourceapi.ResourceClaim, allocated sets.Set[structured.DeviceID]) *Pool {
	p := &Pool{Nodes: v.Nodes, ByNode: make(map[string][]*Device, len(v.Nodes)), ByID: map[structured.DeviceID]*Device{}}
	for _, node := range v.Nodes {
		nds := v.ByNode[node]
		devs := make([]Device, len(nds))
		byNode := make([]*Device, len(nds))
		for i, nd := range nds {
			devs[i] = Device{ID: nd.ID, Node: node, Device: nd.Device, Allocated: allocated.Has(nd.ID)}
			byNode[i] = &devs[i]
			p.ByID[nd.ID] = &devs[i]
		}
		p.ByNode[node] = byNode
	}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			p.addClaim(c)
		}
	}
	return p
}

// addClaim records the allocation of an allocated claim on its devices.
func (p *Pool) addClaim(c *resourceapi.ResourceClaim) {
	claim := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	var holders []types.NamespacedName
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" {
			holders = append(holders, types.NamespacedName{Namespace: c.Namespace, Name: r.Name})
		}
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		dev, ok := p.ByID[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]
		if !ok {
			continue
		}
		dev.Allocated = true
		dev.Holders = holders
		dev.HolderClaim = claim
		dev.Allocations = append(dev.Allocations, Allocation{Claim: claim, Pods: holders, ReservedFor: c.Status.ReservedFor, Consumed: r.ConsumedCapacity, Shared: r.ShareID != nil})
		if dev.Shared() && len(r.ConsumedCapacity) > 0 {
			if dev.Consumed == nil {
				dev.Consumed = structured.ConsumedCapacity{}
			}
			for name, q := range r.ConsumedCapacity {
				dev.Consumed.Add(structured.ConsumedCapacity{name: &q})
			}
		}
	}
}

// Devices returns every device of the pool, node by node.
func (p *Pool) Devices() []*Device {
	out := make([]*Device, 0, len(p.ByID))
	for _, node := range p.Nodes {
		out = append(out, p.ByNode[node]...)
	}
	return out
}

// CountByModel counts the devices of node by model ("" for devices with
// no model attribute); node "" counts the whole pool. With free, only the
// devices that are not allocated count.
func (p *Pool) CountByModel(node string, free bool) map[string]int {
	out := map[string]int{}
	for _, n := range p.Nodes {
		if node != "" && n != node {
			continue
		}
		for _, d := range p.ByNode[n] {
			if !free || !d.Allocated {
				out[d.Model()]++
			}
		}
	}
	return out
}
