package gpupool

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/rota-dev/rota/pkg/gpupool/gpupooltest"
)

// countingDRA is a shared DRA manager that counts how often the allocated
// state is gathered and the claims and slices are listed.
type countingDRA struct {
	fwk.SharedDRAManager
	claims *countingClaims
	slices *countingSlices
}

func (d countingDRA) ResourceClaims() fwk.ResourceClaimTracker { return d.claims }
func (d countingDRA) ResourceSlices() fwk.ResourceSliceLister  { return d.slices }

type countingClaims struct {
	fwk.ResourceClaimTracker
	allocated     []structured.DeviceID
	gathers, list int
}

func (c *countingClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	c.gathers++
	return &structured.AllocatedState{AllocatedDevices: sets.New(c.allocated...)}, nil
}

func (c *countingClaims) List() ([]*resourceapi.ResourceClaim, error) {
	c.list++
	return nil, nil
}

type countingSlices struct {
	fwk.ResourceSliceLister
	slices []*resourceapi.ResourceSlice
	lists  int
}

func (s *countingSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	s.lists++
	return s.slices, nil
}

func newCountingDRA() countingDRA {
	slice := gpupooltest.SharedH200Slice()
	id := structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, "gpu-0")
	return countingDRA{claims: &countingClaims{allocated: []structured.DeviceID{id}}, slices: &countingSlices{slices: []*resourceapi.ResourceSlice{slice}}}
}

// TestCycleDevicesReadOnce: however many plugins read the devices in one
// scheduling cycle, through the inventory or the pool, and in whatever
// order, the allocated state is gathered and the slices and claims listed
// once; the next cycle reads them afresh.
func TestCycleDevicesReadOnce(t *testing.T) {
	ctx := context.Background()
	dra := newCountingDRA()
	var caches Caches
	cs := framework.NewCycleState()

	inv, err := CycleInventory(ctx, cs, dra, &caches.Slices)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := CycleSnapshot(ctx, cs, dra, &caches.Slices)
	if err != nil {
		t.Fatal(err)
	}
	again, err := CycleInventory(ctx, cs.Clone(), dra, &caches.Slices) // preemption reads a clone
	if err != nil {
		t.Fatal(err)
	}
	samePool, err := CycleSnapshot(ctx, cs, dra, &caches.Slices)
	if err != nil {
		t.Fatal(err)
	}
	if again != inv || samePool != pool {
		t.Error("a second read in the same cycle took a new snapshot")
	}
	if g, l, c := dra.claims.gathers, dra.slices.lists, dra.claims.list; g != 1 || l != 1 || c != 1 {
		t.Errorf("one cycle: gathered %d times, listed slices %d times, claims %d times; want 1 each", g, l, c)
	}
	dev := pool.ByNode["h200-0"][0]
	if !dev.Allocated || inv.Free(dev.ID) {
		t.Errorf("pool and inventory disagree on the allocated device: pool %v, inventory free %v", dev.Allocated, inv.Free(dev.ID))
	}

	if _, err := CycleSnapshot(ctx, framework.NewCycleState(), dra, &caches.Slices); err != nil {
		t.Fatal(err)
	}
	if _, err := CycleInventory(ctx, nil, dra, &caches.Slices); err != nil {
		t.Fatal(err)
	}
	if g := dra.claims.gathers; g != 3 {
		t.Errorf("a new cycle and a call without one: gathered %d times in all, want 3", g)
	}
}
