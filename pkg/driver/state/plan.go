package state

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/config"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/resources"
)

// planClaim computes, without side effects, what preparing claim means: which
// of this node's GPUs it gets and with which configuration. Errors name the
// claim's field or the conflicting claim.
func planClaim(nodeName string, inv *gpu.Inventory, claim *resourceapi.ResourceClaim) ([]checkpoint.Device, error) {
	alloc := claim.Status.Allocation
	if alloc == nil {
		return nil, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	configs, err := opaqueConfigs(alloc.Devices.Config)
	if err != nil {
		return nil, err
	}
	var devices []checkpoint.Device
	for i, r := range alloc.Devices.Results {
		if r.Driver != resources.DriverName {
			continue
		}
		if r.Pool != nodeName {
			return nil, fmt.Errorf("status.allocation.devices.results[%d]: pool %q is not this node's pool %q", i, r.Pool, nodeName)
		}
		g, ok := gpuByDeviceName(inv, r.Device)
		if !ok {
			return nil, fmt.Errorf("status.allocation.devices.results[%d]: device %q does not exist on node %s", i, r.Device, nodeName)
		}
		cfg := configFor(configs, r.Request)
		if cfg.MemoryMiB != nil && uint64(*cfg.MemoryMiB)<<20 > g.MemoryBytes {
			return nil, fmt.Errorf("GpuConfig for request %q: memoryMiB %d exceeds the %d MiB of %s (%s)",
				r.Request, *cfg.MemoryMiB, g.MemoryBytes>>20, r.Device, g.ProductName)
		}
		devices = append(devices, checkpoint.Device{
			Requests:  []string{r.Request},
			Pool:      r.Pool,
			Device:    r.Device,
			UUID:      g.UUID,
			Minor:     g.Minor,
			Strategy:  string(cfg.Sharing.Strategy),
			TimeSlice: string(cfg.EffectiveTimeSlice()),
			MemoryMiB: cfg.MemoryMiB,
		})
	}
	return devices, nil
}

func gpuByDeviceName(inv *gpu.Inventory, name string) (gpu.GPU, bool) {
	for _, g := range inv.GPUs {
		if resources.DeviceName(g.Index) == name {
			return g, true
		}
	}
	return gpu.GPU{}, false
}

type requestConfig struct {
	requests []string
	cfg      *config.GpuConfig
}

// opaqueConfigs decodes this driver's opaque configs, class configs first and
// claim configs after, so that a later entry (the claim's) overrides an
// earlier one (the class's) for the requests it names.
func opaqueConfigs(in []resourceapi.DeviceAllocationConfiguration) ([]requestConfig, error) {
	var fromClass, fromClaim []requestConfig
	for i, c := range in {
		if c.Opaque == nil || c.Opaque.Driver != resources.DriverName {
			continue
		}
		cfg, err := config.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("status.allocation.devices.config[%d].opaque.parameters (from %s): %w", i, c.Source, err)
		}
		rc := requestConfig{requests: c.Requests, cfg: cfg}
		if c.Source == resourceapi.AllocationConfigSourceClass {
			fromClass = append(fromClass, rc)
		} else {
			fromClaim = append(fromClaim, rc)
		}
	}
	return append(fromClass, fromClaim...), nil
}

// configFor returns the last config that applies to request ("req" or
// "req/subrequest"), or the default (exclusive) config.
func configFor(configs []requestConfig, request string) *config.GpuConfig {
	parent, _, _ := strings.Cut(request, "/")
	cfg := config.DefaultConfig()
	for _, c := range configs {
		if len(c.requests) == 0 || slices.Contains(c.requests, request) || slices.Contains(c.requests, parent) {
			cfg = c.cfg
		}
	}
	return cfg
}

// conflict reports why dev cannot be prepared for claim uid given the other
// claims in the checkpoint, or nil. One GPU is never handed to two claims when
// either of them is exclusive, and time-sliced claims must agree on the interval.
func conflict(cp *checkpoint.Checkpoint, uid string, dev checkpoint.Device) error {
	for _, other := range sortedClaims(cp) {
		if other.UID == uid {
			continue
		}
		for _, od := range other.Devices {
			if od.UUID != dev.UUID {
				continue
			}
			switch {
			case od.Strategy == string(config.Exclusive):
				return fmt.Errorf("GPU %s (%s) is already prepared exclusively for claim %s/%s (uid %s)",
					dev.Device, dev.UUID, other.Namespace, other.Name, other.UID)
			case dev.Strategy == string(config.Exclusive):
				return fmt.Errorf("GPU %s (%s) is shared by time-sliced claim %s/%s (uid %s); an exclusive claim needs it alone",
					dev.Device, dev.UUID, other.Namespace, other.Name, other.UID)
			case od.TimeSlice != dev.TimeSlice:
				return fmt.Errorf("GPU %s (%s) runs with time slice %s for claim %s/%s (uid %s); this claim asks for %s",
					dev.Device, dev.UUID, od.TimeSlice, other.Namespace, other.Name, other.UID, dev.TimeSlice)
			}
		}
	}
	return nil
}

func sortedClaims(cp *checkpoint.Checkpoint) []checkpoint.Claim {
	out := make([]checkpoint.Claim, 0, len(cp.Claims))
	for _, c := range cp.Claims {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b checkpoint.Claim) int { return strings.Compare(a.UID, b.UID) })
	return out
}
