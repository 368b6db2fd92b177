package reservation

import (
	"fmt"
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

// ClaimMemoryMiB is the memoryMiB a claim declares in its GpuConfig opaque
// configuration for driver gpu.rota.dev, nil when it declares none. When
// several configs name memoryMiB the last one wins, as in the driver.
func ClaimMemoryMiB(claim *resourceapi.ResourceClaim) (*int64, error) {
	var mem *int64
	for i, c := range claim.Spec.Devices.Config {
		if c.Opaque == nil || c.Opaque.Driver != gpuv1.DriverName {
			continue
		}
		cfg, err := gpuv1.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("claim %s/%s spec.devices.config[%d].opaque.parameters: %w", claim.Namespace, claim.Name, i, err)
		}
		if cfg.MemoryMiB != nil {
			mem = cfg.MemoryMiB
		}
	}
	return mem, nil
}
