package reservation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// DefaultHeadroom is the share of a GPU's memory members may budget when the
// spec does not say.
const DefaultHeadroom = "0.95"

// headroomScale is the fixed-point scale of a headroom: four decimal places.
const headroomScale = 10000

// ParseHeadroom turns a decimal in (0, 1] with up to four places into
// ten-thousandths, so that budgets are computed exactly, never in floating
// point ("0.95" -> 9500).
func ParseHeadroom(s string) (int64, error) {
	if s == "" {
		s = DefaultHeadroom
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole != "0" && whole != "1" || len(frac) > 4 {
		return 0, fmt.Errorf("headroom %q: must be a decimal in (0, 1] with at most four places, such as 0.95", s)
	}
	frac += strings.Repeat("0", 4-len(frac))
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("headroom %q: must be a decimal in (0, 1] with at most four places, such as 0.95", s)
	}
	v := f
	if whole == "1" {
		v += headroomScale
	}
	if v <= 0 || v > headroomScale {
		return 0, fmt.Errorf("headroom %q: must be in (0, 1]", s)
	}
	return v, nil
}

// BudgetMiB is floor(memoryMiB × headroom) for a headroom in ten-thousandths:
// an H200's 143771 MiB at 0.95 gives 136582 MiB.
func BudgetMiB(memoryMiB, headroom int64) int64 {
	return memoryMiB * headroom / headroomScale
}

// ClaimMemory is what a claim's GpuConfigs (driver gpu.rota.dev) say
// about memoryMiB, request by request, read the way the driver reads them
// (pkg/driver/state): the last config that applies to a request decides,
// class configs before claim configs, whether or not it names memoryMiB.
type ClaimMemory struct {
	configs []memoryConfig
}

type memoryConfig struct {
	requests  []string // empty: every request
	memoryMiB *int64
}

// ClaimMemoryOf decodes the claim's configs: those of its allocation once
// allocated (class and claim configs, as the driver gets them), those of its
// spec before. Errors name the field.
func ClaimMemoryOf(claim *resourceapi.ResourceClaim) (ClaimMemory, error) {
	if claim.Status.Allocation != nil {
		return AllocationMemoryOf(claim, claim.Status.Allocation)
	}
	var out ClaimMemory
	for i, c := range claim.Spec.Devices.Config {
		mc, ok, err := decodeMemory(claim, "spec.devices.config", i, c.DeviceConfiguration, c.Requests)
		if err != nil {
			return ClaimMemory{}, err
		}
		if ok {
			out.configs = append(out.configs, mc)
		}
	}
	return out, nil
}

// AllocationMemoryOf decodes the configs of alloc, an allocation of claim
// (its status, or one the scheduler has not written yet): class configs
// first, then the claim's, as the driver applies them.
func AllocationMemoryOf(claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult) (ClaimMemory, error) {
	var fromClass, fromClaim []memoryConfig
	for i, c := range alloc.Devices.Config {
		mc, ok, err := decodeMemory(claim, "status.allocation.devices.config", i, c.DeviceConfiguration, c.Requests)
		if err != nil {
			return ClaimMemory{}, err
		}
		switch {
		case !ok:
		case c.Source == resourceapi.AllocationConfigSourceClass:
			fromClass = append(fromClass, mc)
		default:
			fromClaim = append(fromClaim, mc)
		}
	}
	return ClaimMemory{configs: append(fromClass, fromClaim...)}, nil
}

func decodeMemory(claim *resourceapi.ResourceClaim, path string, i int, c resourceapi.DeviceConfiguration, requests []string) (memoryConfig, bool, error) {
	if c.Opaque == nil || c.Opaque.Driver != gpuv1.DriverName {
		return memoryConfig{}, false, nil
	}
	cfg, err := gpuv1.Decode(c.Opaque.Parameters.Raw)
	if err != nil {
		return memoryConfig{}, false, fmt.Errorf("claim %s/%s %s[%d].opaque.parameters: %w", claim.Namespace, claim.Name, path, i, err)
	}
	return memoryConfig{requests: requests, memoryMiB: cfg.MemoryMiB}, true, nil
}

// For is the memoryMiB of each device allocated for request ref ("req" or
// "req/subrequest", as allocation results name it), nil when the config
// that applies names none (or no config applies).
func (m ClaimMemory) For(ref string) *int64 {
	parent, _, _ := strings.Cut(ref, "/")
	var mem *int64
	for _, c := range m.configs {
		if len(c.requests) == 0 || slices.Contains(c.requests, ref) || slices.Contains(c.requests, parent) {
			mem = c.memoryMiB
		}
	}
	return mem
}

// Declared reports whether any config names memoryMiB.
func (m ClaimMemory) Declared() bool {
	for _, c := range m.configs {
		if c.memoryMiB != nil {
			return true
		}
	}
	return false
}

// ClaimMemoryMiB is the memoryMiB the claim's devices get, summed over its
// allocated devices once allocated, and before that over its requests'
// first tiers (count × memoryMiB); nil when no device gets one. The
// reservation controller reports it per member.
func ClaimMemoryMiB(claim *resourceapi.ResourceClaim) (*int64, error) {
	m, err := ClaimMemoryOf(claim)
	if err != nil {
		return nil, err
	}
	var sum int64
	declared := false
	charge := func(ref string, n int64) {
		if mem := m.For(ref); mem != nil {
			sum += *mem * n
			declared = true
		}
	}
	if alloc := claim.Status.Allocation; alloc != nil {
		for _, r := range alloc.Devices.Results {
			if r.Driver == gpuv1.DriverName {
				charge(r.Request, 1)
			}
		}
	} else {
		for _, r := range claim.Spec.Devices.Requests {
			switch {
			case r.Exactly != nil:
				charge(r.Name, max(r.Exactly.Count, 1))
			case len(r.FirstAvailable) > 0:
				charge(r.Name+"/"+r.FirstAvailable[0].Name, max(r.FirstAvailable[0].Count, 1))
			}
		}
	}
	if !declared {
		return nil, nil
	}
	return &sum, nil
}
