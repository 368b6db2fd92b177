package reservation

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// HeldGPU locates a reservation's GPU in the ResourceSlices.
type HeldGPU struct {
	Pool, Device string
}

func (g HeldGPU) String() string { return g.Device }

// HeldGPUs maps the reservation's GPUs to their memory in MiB.
func HeldGPUs(res *rotav1.GPUReservation) map[HeldGPU]int64 {
	out := make(map[HeldGPU]int64, len(res.Status.Devices))
	for _, d := range res.Status.Devices {
		out[HeldGPU{d.Pool, d.Device}] = d.MemoryMiB
	}
	return out
}

// Charges is VRAM in MiB per held GPU.
type Charges map[HeldGPU]int64

// Add adds every charge of o.
func (c Charges) Add(o Charges) {
	for g, n := range o {
		c[g] += n
	}
}

// GPUs lists the charged GPUs by pool, then device.
func (c Charges) GPUs() []HeldGPU {
	keys := make([]HeldGPU, 0, len(c))
	for g := range c {
		keys = append(keys, g)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Pool != keys[j].Pool {
			return keys[i].Pool < keys[j].Pool
		}
		return keys[i].Device < keys[j].Device
	})
	return keys
}

// String lists the charges by GPU: "gpu-0 40960 MiB, gpu-1 0 MiB".
func (c Charges) String() string {
	keys := c.GPUs()
	parts := make([]string, 0, len(keys))
	for _, g := range keys {
		parts = append(parts, fmt.Sprintf("%s %d MiB", g.Device, c[g]))
	}
	return strings.Join(parts, ", ")
}

// AllocationCharges is what alloc, an allocation of claim (its status or
// one not written yet), charges the held GPUs: each allocated device of
// driver gpu.rota.dev on a held GPU costs the memoryMiB its request's
// GpuConfig gives it; without one, the memory the allocation consumed
// (consumable capacity), or else the whole GPU. A claim with two devices on
// two GPUs costs each GPU its share; devices outside the held GPUs cost the
// budget nothing. A config that does not decode is reported, and its
// devices are charged as if it named no memoryMiB: the charges are always
// usable.
func AllocationCharges(claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult, held map[HeldGPU]int64) (Charges, error) {
	out := Charges{}
	if !onHeld(alloc, held) {
		return out, nil // most claims: nothing to decode
	}
	mem, err := AllocationMemoryOf(claim, alloc)
	for _, r := range alloc.Devices.Results {
		g := HeldGPU{r.Pool, r.Device}
		whole, ok := held[g]
		if r.Driver != gpuv1.DriverName || !ok {
			continue
		}
		consumed, hasConsumed := r.ConsumedCapacity[gpuv1.CapacityMemory]
		switch m := mem.For(r.Request); {
		case m != nil:
			out[g] += *m
		case hasConsumed:
			out[g] += consumed.Value() >> 20
		default:
			out[g] += whole
		}
	}
	return out, err
}

// onHeld reports whether alloc has a device of driver gpu.rota.dev on a
// held GPU.
func onHeld(alloc *resourceapi.AllocationResult, held map[HeldGPU]int64) bool {
	for _, r := range alloc.Devices.Results {
		if _, ok := held[HeldGPU{r.Pool, r.Device}]; ok && r.Driver == gpuv1.DriverName {
			return true
		}
	}
	return false
}
