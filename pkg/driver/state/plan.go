package state

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
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
		if r.Driver != gpuv1.DriverName {
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
		if err := checkMemory(cfg, r, g); err != nil {
			return nil, err
		}
		d := checkpoint.Device{
			Requests:  []string{r.Request},
			Pool:      r.Pool,
			Device:    r.Device,
			UUID:      g.UUID,
			Minor:     g.Minor,
			Strategy:  string(cfg.Sharing.Strategy),
			TimeSlice: string(cfg.EffectiveTimeSlice()),
			MemoryMiB: cfg.MemoryMiB,
		}
		if r.ShareID != nil {
			d.ShareID = string(*r.ShareID)
		}
		devices = append(devices, d)
	}
	if err := conflictWithin(devices); err != nil {
		return nil, err
	}
	return devices, nil
}

// checkMemory refuses a memoryMiB the GPU cannot give the claim: more than
// the GPU has, or, on a GPU published with consumable memory, more than the
// allocation consumed (the allocator kept only the consumed amounts of the
// claims sharing the GPU within its memory, so a larger memoryMiB would
// overcommit it behind the allocator's back).
func checkMemory(cfg *gpuv1.GpuConfig, r resourceapi.DeviceRequestAllocationResult, g gpu.GPU) error {
	if cfg.MemoryMiB == nil {
		return nil
	}
	want := *cfg.MemoryMiB
	if uint64(want)<<20 > g.MemoryBytes {
		return fmt.Errorf("GpuConfig for request %q: memoryMiB %d exceeds the %d MiB of %s (%s)",
			r.Request, want, g.MemoryBytes>>20, r.Device, g.ProductName)
	}
	if consumed, ok := r.ConsumedCapacity[gpuv1.CapacityMemory]; ok && want<<20 > consumed.Value() {
		return fmt.Errorf("GpuConfig for request %q: memoryMiB %d is more than the %d MiB of %s the allocation consumed; "+
			"ask for it with capacity.requests.memory: %dMi in the request", r.Request, want, consumed.Value()>>20, r.Device, want)
	}
	return nil
}

// conflictWithin applies the sharing rules of conflict to the devices of one
// claim: a GPU published with consumable memory can be allocated to two
// requests of the same claim, which is only fine when both time-slice it
// with the same interval.
func conflictWithin(devices []checkpoint.Device) error {
	for i, a := range devices {
		for _, b := range devices[i+1:] {
			if a.UUID != b.UUID {
				continue
			}
			if a.Strategy == string(gpuv1.Exclusive) || b.Strategy == string(gpuv1.Exclusive) {
				return fmt.Errorf("GPU %s (%s) is allocated to requests %q and %q of this claim, and an exclusive request needs it alone",
					a.Device, a.UUID, a.Requests[0], b.Requests[0])
			}
			if a.TimeSlice != b.TimeSlice {
				return fmt.Errorf("GPU %s (%s) is allocated to requests %q (time slice %s) and %q (time slice %s) of this claim; one GPU runs with one interval",
					a.Device, a.UUID, a.Requests[0], a.TimeSlice, b.Requests[0], b.TimeSlice)
			}
		}
	}
	return nil
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
	cfg      *gpuv1.GpuConfig
}

// opaqueConfigs decodes this driver's opaque configs, class configs first and
// claim configs after, so that a later entry (the claim's) overrides an
// earlier one (the class's) for the requests it names.
func opaqueConfigs(in []resourceapi.DeviceAllocationConfiguration) ([]requestConfig, error) {
	var fromClass, fromClaim []requestConfig
	for i, c := range in {
		if c.Opaque == nil || c.Opaque.Driver != gpuv1.DriverName {
			continue
		}
		cfg, err := gpuv1.Decode(c.Opaque.Parameters.Raw)
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
func configFor(configs []requestConfig, request string) *gpuv1.GpuConfig {
	parent, _, _ := strings.Cut(request, "/")
	cfg := gpuv1.DefaultConfig()
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
			case od.Strategy == string(gpuv1.Exclusive):
				return fmt.Errorf("GPU %s (%s) is already prepared exclusively for claim %s/%s (uid %s)",
					dev.Device, dev.UUID, other.Namespace, other.Name, other.UID)
			case dev.Strategy == string(gpuv1.Exclusive):
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
