package gpu

import (
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// knownModels maps a token of the NVML product name to the short model family
// published as the "model" attribute. Longer tokens come first so that "H100"
// does not swallow "GH100" style names and "L40S" is not read as "L40" or "L4".
var knownModels = []string{
	"GB200", "GH200", "B200", "B100", "H200", "H100", "H800", "H20",
	"A100", "A800", "A40", "A30", "A10G", "A10", "A16", "A2",
	"L40S", "L40", "L20", "L4", "V100", "T4", "RTX",
}

// ModelFromName derives the short model family ("H100", "L40S", …) from an NVML
// product name such as "NVIDIA H100 80GB HBM3" or "NVIDIA A100-SXM4-80GB".
// It returns "" when no family is recognised.
func ModelFromName(productName string) string {
	fields := strings.FieldsFunc(strings.ToUpper(productName), func(r rune) bool {
		return r == ' ' || r == '-' || r == '_'
	})
	for _, m := range knownModels {
		for _, f := range fields {
			if f == m {
				return m
			}
		}
	}
	return ""
}

// ArchitectureName is the human name of an NVML architecture constant.
func ArchitectureName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "Kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "Maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "Pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada"
	case nvml.DEVICE_ARCH_HOPPER:
		return "Hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "Blackwell"
	default:
		return ""
	}
}
