package tiering

import (
	"context"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// snapshotInventory reads the devices and the allocated state from the
// shared DRA manager, the same inputs DynamicResources gives its allocator.
// The slice index is rebuilt only when the slice list changed.
func (pl *Tiering) snapshotInventory(ctx context.Context) (*gpupool.Inventory, error) {
	return gpupool.SnapshotInventory(ctx, pl.dra, pl.views)
}

// matcherFor compiles a tier's class and selectors; its results are
// remembered per device across cycles.
func (pl *Tiering) matcherFor(t gpupool.Tier) (*gpupool.Matcher, error) {
	return gpupool.NewMatcher(pl.dra.DeviceClasses(), pl.celCache, pl.matches, t)
}
