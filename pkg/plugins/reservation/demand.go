package reservation

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/pkg/gpupool"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// tierDemand is what one way of satisfying a request costs: count devices
// (all held GPUs for allocationMode All), each charged memoryMiB on the GPU
// it gets. declared is false when no GpuConfig gives the devices a
// memoryMiB.
type tierDemand struct {
	label     string
	count     int64
	all       bool
	memoryMiB int64
	declared  bool
}

// requestDemand is one request of an unallocated claim: its tiers in the
// order the allocator tries them.
type requestDemand struct {
	label string
	tiers []tierDemand
}

// demandOf reads what each request of claims would cost, per device, from
// the GpuConfig that applies to it (the driver's rule: the last config
// naming the request, its parent request or no request). missing names the
// first request or subrequest that would get no memoryMiB, "" when all do.
func demandOf(claims []*resourceapi.ResourceClaim) (out []requestDemand, missing string, _ error) {
	for _, c := range claims {
		mem, err := rsv.ClaimMemoryOf(c)
		if err != nil {
			return nil, "", err
		}
		for _, r := range gpupool.ClaimRequests(c) {
			rd := requestDemand{label: fmt.Sprintf("request %s of claim %s", r.Name, c.Name)}
			for i, t := range r.Tiers {
				td := tierDemand{label: fmt.Sprintf("request %s of claim %s", r.Ref(i), c.Name), count: t.Count, all: t.All}
				if m := mem.For(r.Ref(i)); m != nil {
					td.memoryMiB, td.declared = *m, true
				} else if missing == "" {
					missing = td.label
				}
				rd.tiers = append(rd.tiers, td)
			}
			out = append(out, rd)
		}
	}
	return out, missing, nil
}

// tooLarge returns a tier of a request none of whose tiers fits one GPU's
// budget on its own.
func tooLarge(demand []requestDemand, budget int64) (tierDemand, bool) {
	for _, r := range demand {
		fits := false
		for _, t := range r.tiers {
			if !t.declared || t.memoryMiB <= budget {
				fits = true
				break
			}
		}
		if !fits && len(r.tiers) > 0 {
			return r.tiers[0], true
		}
	}
	return tierDemand{}, false
}

// gpuRoom is the budget left on one held GPU.
type gpuRoom struct {
	gpu  rsv.HeldGPU
	free int64
}

// fit reports whether every request can take one of its tiers within the
// budget left on the held GPUs (free per GPU), each device on the GPU with
// the most room. It is what Filter can know before the allocator chooses
// devices: a pod it refuses cannot fit, while Reserve checks the devices
// actually chosen. The first request that cannot fit is returned.
func fit(free map[rsv.HeldGPU]int64, demand []requestDemand) (requestDemand, bool) {
	rooms := make([]gpuRoom, 0, len(free))
	for g, n := range free {
		rooms = append(rooms, gpuRoom{g, n})
	}
	for _, r := range demand {
		placed := false
		for _, t := range r.tiers {
			if next, ok := place(rooms, t); ok {
				rooms, placed = next, true
				break
			}
		}
		if !placed {
			return r, false
		}
	}
	return requestDemand{}, true
}

// place puts t's devices one by one on the GPU with the most room and
// returns the rooms left, or false when some device does not fit.
func place(rooms []gpuRoom, t tierDemand) ([]gpuRoom, bool) {
	next := append([]gpuRoom(nil), rooms...)
	n := t.count
	if t.all {
		n = int64(len(next))
	}
	for range n {
		sortRooms(next)
		if len(next) == 0 || next[0].free < t.memoryMiB {
			return nil, false
		}
		next[0].free -= t.memoryMiB
	}
	return next, true
}

// sortRooms orders rooms by most budget left, then by pool and device.
func sortRooms(rooms []gpuRoom) {
	sort.Slice(rooms, func(i, j int) bool {
		if rooms[i].free != rooms[j].free {
			return rooms[i].free > rooms[j].free
		}
		if rooms[i].gpu.Pool != rooms[j].gpu.Pool {
			return rooms[i].gpu.Pool < rooms[j].gpu.Pool
		}
		return rooms[i].gpu.Device < rooms[j].gpu.Device
	})
}

// describe says what a request asks: "8192 MiB" for one device, "2 × 8192
// MiB" for several; tiers are joined with " or ".
func (r requestDemand) describe() string {
	parts := make([]string, 0, len(r.tiers))
	for _, t := range r.tiers {
		switch {
		case t.all:
			parts = append(parts, fmt.Sprintf("every held GPU × %d MiB", t.memoryMiB))
		case t.count == 1:
			parts = append(parts, fmt.Sprintf("%d MiB", t.memoryMiB))
		default:
			parts = append(parts, fmt.Sprintf("%d × %d MiB", t.count, t.memoryMiB))
		}
	}
	return strings.Join(parts, " or ")
}
