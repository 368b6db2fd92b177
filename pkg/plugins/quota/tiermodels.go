package quota

import (
	"context"
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// tierModels remembers, for the published slices, how many devices of
// each model a tier's selectors match. PreFilter asks it for every tier of
// every pod of a limited tenant; the answer changes only when the slices
// do (the slice cache then hands out a new *gpupool.Slices), so each tier
// is counted once per slice set instead of once per cycle.
type tierModels struct {
	mu     sync.Mutex
	slices *gpupool.Slices
	byKey  map[string]map[string]int64
}

// of returns the models m matches among inv's devices, with their counts;
// the map is shared and must not be changed.
func (c *tierModels) of(ctx context.Context, inv *gpupool.Inventory, m *gpupool.Matcher, attr string) map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slices != inv.Slices {
		c.slices, c.byKey = inv.Slices, map[string]map[string]int64{}
	}
	key := m.Key()
	if models, ok := c.byKey[key]; ok {
		return models
	}
	models := map[string]int64{}
	for _, node := range inv.Nodes {
		for _, nd := range inv.ByNode[node] {
			d := gpupool.Device{ID: nd.ID, Node: node, Device: nd.Device}
			if m.Matches(ctx, &d) {
				models[gpupool.StringAttribute(nd.Device, nd.ID.Driver.String(), resourceapi.QualifiedName(attr))]++
			}
		}
	}
	c.byKey[key] = models
	return models
}
