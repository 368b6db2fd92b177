package gpupool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// Inventory is the scheduler's view of the devices at one instant: the
// published slices (with DeviceTaintRules applied) and the allocated state,
// which includes allocations still in flight — the same inputs
// DynamicResources gives its allocator. It is read only.
type Inventory struct {
	*Slices
	// Allocated is the allocated state's set of whole devices.
	Allocated sets.Set[structured.DeviceID]
	// State is the allocated state itself, for the structured allocator.
	State structured.AllocatedState
}

// Free reports whether the device is neither allocated nor being allocated.
func (inv *Inventory) Free(id structured.DeviceID) bool { return !inv.Allocated.Has(id) }

// SnapshotInventory reads the allocated state and the slices from the
// scheduler's shared DRA manager. The slice index comes from views, which
// rebuilds it only when the slice list changed; a nil views builds a new one.
func SnapshotInventory(ctx context.Context, dra fwk.SharedDRAManager, views *SliceCache) (*Inventory, error) {
	var state *structured.AllocatedState
	// The claim tracker reports concurrent modification as an error; like
	// DynamicResources, try again briefly.
	err := wait.PollUntilContextTimeout(ctx, time.Microsecond, 5*time.Second, true, func(context.Context) (bool, error) {
		s, err := dra.ResourceClaims().GatherAllocatedState()
		if err != nil {
			return false, nil //nolint:nilerr // retried until timeout
		}
		if s == nil {
			return false, errors.New("nil allocated state")
		}
		state = s
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("gather allocated devices: %w", err)
	}
	slices, err := dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	allocated := state.AllocatedDevices
	if allocated == nil {
		allocated = sets.New[structured.DeviceID]()
	}
	return &Inventory{Slices: views.Get(slices), Allocated: allocated, State: *state}, nil
}

// DeviceOf is nd of node as the inventory knows it: whether it is allocated
// (or being allocated) and what claims consume of it, enough for FreeFor and
// for matching, without the claims' holders, which only the pool
// (CycleSnapshot) lists every claim to find.
func (inv *Inventory) DeviceOf(node string, nd NodeDevice) Device {
	return Device{ID: nd.ID, Node: node, Device: nd.Device, Allocated: inv.Allocated.Has(nd.ID), Consumed: inv.State.AggregatedCapacity[nd.ID]}
}
