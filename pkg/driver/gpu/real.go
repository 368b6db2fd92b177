package gpu

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// NewReal returns the host's NVML. Nothing is loaded until Init.
func NewReal() nvml.Interface { return nvml.New() }
