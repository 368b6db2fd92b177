package gpu

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// l4 is missing from go-nvml's mock catalogue.
var l4 = gpus.Config{
	Name:         "NVIDIA L4",
	Architecture: nvml.DEVICE_ARCH_ADA,
	Brand:        nvml.BRAND_NVIDIA,
	MemoryMB:     23034,
	CudaMajor:    8,
	CudaMinor:    9,
	PciDeviceId:  0x27B810DE,
}

var l40s = gpus.Config{
	Name:         "NVIDIA L40S",
	Architecture: nvml.DEVICE_ARCH_ADA,
	Brand:        nvml.BRAND_NVIDIA,
	MemoryMB:     46068,
	CudaMajor:    8,
	CudaMinor:    9,
	PciDeviceId:  0x26B910DE,
}

// h200 is go-nvml's H200 with the memory a real H200 141GB reports through
// NVML, 143,771 MiB (go-nvml's mock says 141 GiB): reservation budgets
// computed on a simulated node then match a real one (docs/reservations.md, "VRAM budget": 136,582 MiB at
// a headroom of 0.95).
var h200 = func() gpus.Config {
	c := gpus.H200_SXM5_141GB
	c.MemoryMB = 143771
	return c
}()

// mockModels are the GPU kinds the custom profile form ("h100:4,a100:4") accepts.
var mockModels = map[string]gpus.Config{
	"h100":    gpus.H100_SXM5_80GB,
	"h200":    h200,
	"a100":    gpus.A100_SXM4_80GB,
	"a100-40": gpus.A100_PCIE_40GB,
	"a30":     gpus.A30_PCIE_24GB,
	"b200":    gpus.B200_SXM5_180GB,
	"l4":      l4,
	"l40s":    l40s,
}

// namedProfiles are whole machines, by the name an operator passes in
// --mock-profile.
var namedProfiles = map[string]string{
	"dgx-h100": "h100:8",
	"dgx-a100": "a100:8",
	"hgx-h200": "h200:8",
	"dgx-b200": "b200:8",
	"l4x2":     "l4:2",
}

// MockDriverVersion deliberately has a leading zero in its last part, as real
// NVIDIA releases do, so the semver normalisation runs in every mock test.
const MockDriverVersion = "560.35.03"

// MockCUDADriverVersion is CUDA 12.6 in NVML's integer encoding.
const MockCUDADriverVersion = 12060

// ProfileNames lists the named mock profiles, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(namedProfiles))
	for n := range namedProfiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseProfile resolves a named profile ("dgx-h100") or the custom form
// "h100:4,a100:4" into the GPUs of the simulated machine, in index order.
func ParseProfile(profile string) ([]gpus.Config, error) {
	spec := strings.TrimSpace(profile)
	if named, ok := namedProfiles[spec]; ok {
		spec = named
	}
	if spec == "" {
		return nil, fmt.Errorf("empty mock profile; use one of %s or a list such as h100:4,a100:4", strings.Join(ProfileNames(), ", "))
	}
	var out []gpus.Config
	for _, part := range strings.Split(spec, ",") {
		kind, countStr, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			countStr = "1"
		}
		cfg, known := mockModels[strings.ToLower(kind)]
		if !known {
			return nil, fmt.Errorf("mock profile %q: unknown GPU kind %q (known: %s; named profiles: %s)",
				profile, kind, strings.Join(mockModelNames(), ", "), strings.Join(ProfileNames(), ", "))
		}
		n, err := strconv.Atoi(countStr)
		if err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("mock profile %q: count %q for %s must be 1..16", profile, countStr, kind)
		}
		out = append(out, gpus.Multiple(n, cfg)...)
	}
	if len(out) > 16 {
		return nil, fmt.Errorf("mock profile %q: %d GPUs, at most 16 per node", profile, len(out))
	}
	return out, nil
}

func mockModelNames() []string {
	names := make([]string, 0, len(mockModels))
	for n := range mockModels {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
