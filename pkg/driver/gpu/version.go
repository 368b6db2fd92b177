package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// NormalizeSemver turns the dotted numeric versions NVIDIA reports into strict
// semver, which the API server requires for VersionValue attributes:
// "535.104.05" → "535.104.5", "9.0" → "9.0.0", "570.86.10.1" → "570.86.10+1".
// Anything that is not dotted decimal numbers is an error; callers then omit the
// version attribute instead of publishing a slice the API server would reject.
func NormalizeSemver(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fmt.Errorf("empty version")
	}
	parts := strings.Split(raw, ".")
	nums := make([]string, 0, len(parts))
	for _, p := range parts {
		if p == "" || len(p) > 9 {
			return "", fmt.Errorf("version %q: part %q is not a number", raw, p)
		}
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return "", fmt.Errorf("version %q: part %q is not a number", raw, p)
		}
		nums = append(nums, strconv.FormatUint(n, 10))
	}
	for len(nums) < 3 {
		nums = append(nums, "0")
	}
	v := strings.Join(nums[:3], ".")
	if len(nums) > 3 {
		v += "+" + strings.Join(nums[3:], ".")
	}
	return v, nil
}

// CUDAVersionString formats NVML's integer CUDA driver version (1000×major +
// 10×minor, e.g. 12040) as semver "12.4.0".
func CUDAVersionString(v int) (string, error) {
	if v <= 0 {
		return "", fmt.Errorf("CUDA driver version %d is not positive", v)
	}
	return fmt.Sprintf("%d.%d.0", v/1000, (v%1000)/10), nil
}
