package tiering

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// cycleInventory returns the devices and the allocated state of the
// scheduling cycle cs, taken from the shared DRA manager once per cycle for
// every Rota plugin: the same inputs DynamicResources gives its allocator.
// The slice index is rebuilt only when the slice list changed.
func (pl *Tiering) cycleInventory(ctx context.Context, cs fwk.CycleState) (*gpupool.Inventory, error) {
	return gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices)
}

// matcherFor compiles a tier's class and selectors; its results are
// remembered per device across cycles.
func (pl *Tiering) matcherFor(t gpupool.Tier) (*gpupool.Matcher, error) {
	return gpupool.NewMatcher(pl.dra.DeviceClasses(), pl.caches.CEL, pl.caches.Matches, t)
}
