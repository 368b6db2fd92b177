package gpupool

import (
	"context"
	"sync"

	fwk "k8s.io/kube-scheduler/framework"
)

// cycleStateKey is where the first plugin that reads the devices in a
// scheduling cycle leaves them for the others.
const cycleStateKey fwk.StateKey = "RotaGPUPool"

// cycleDevices holds one cycle's inventory and, once a plugin asked for
// it, the pool built from it. Both are read only, so Clone shares them.
type cycleDevices struct {
	mu   sync.Mutex
	inv  *Inventory
	pool *Pool
}

func (c *cycleDevices) Clone() fwk.StateData { return c }

// CycleInventory returns the inventory of the scheduling cycle cs. Every
// Rota plugin reads the devices of a cycle through it or CycleSnapshot, so
// the allocated state is gathered once per cycle, the way DynamicResources
// gathers it once at PreFilter for all its Filter calls: what Tiering ranks
// at PreScore is what the filters saw. A nil cs takes a fresh inventory.
// views is the scheduler's slice-index cache (nil for none).
func CycleInventory(ctx context.Context, cs fwk.CycleState, dra fwk.SharedDRAManager, views *SliceCache) (*Inventory, error) {
	c := cycleDevicesOf(cs)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inventory(ctx, dra, views)
}

// CycleSnapshot returns the pool of the scheduling cycle cs, built from
// CycleInventory's inventory the first time a plugin asks for it in the
// cycle. The pool is read only. A nil cs takes a fresh snapshot.
func CycleSnapshot(ctx context.Context, cs fwk.CycleState, dra fwk.SharedDRAManager, views *SliceCache) (*Pool, error) {
	c := cycleDevicesOf(cs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pool != nil {
		return c.pool, nil
	}
	inv, err := c.inventory(ctx, dra, views)
	if err != nil {
		return nil, err
	}
	pool, err := poolOf(inv, dra)
	if err != nil {
		return nil, err
	}
	c.pool = pool
	return pool, nil
}

// cycleDevicesOf returns the cycle's devices, storing an empty holder in cs
// on first use. Plugins read them from extension points that the framework
// calls one at a time, never from per-node Filter or Score calls.
func cycleDevicesOf(cs fwk.CycleState) *cycleDevices {
	if cs == nil {
		return &cycleDevices{}
	}
	if data, err := cs.Read(cycleStateKey); err == nil {
		if c, ok := data.(*cycleDevices); ok {
			return c
		}
	}
	c := &cycleDevices{}
	cs.Write(cycleStateKey, c)
	return c
}

// inventory returns the cycle's inventory, taking it on first use. The
// caller holds c.mu.
func (c *cycleDevices) inventory(ctx context.Context, dra fwk.SharedDRAManager, views *SliceCache) (*Inventory, error) {
	if c.inv != nil {
		return c.inv, nil
	}
	inv, err := SnapshotInventory(ctx, dra, views)
	if err != nil {
		return nil, err
	}
	c.inv = inv
	return inv, nil
}
