package app

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
)

// openNVML initialises real NVML or the mock and discovers the GPUs, logging
// each GPU it will not publish. The returned close function shuts NVML down.
func openNVML(ctx context.Context, o *Options, clk clock.WithTicker) (nvml.Interface, *gpu.Mock, gpu.Inventory, func(), error) {
	var lib nvml.Interface
	var mock *gpu.Mock
	if o.MockProfile != "" {
		m, err := gpu.NewMock(o.NodeName, o.MockProfile, clk)
		if err != nil {
			return nil, nil, gpu.Inventory{}, nil, err
		}
		lib, mock = m, m
	} else {
		lib = gpu.NewReal()
	}
	if err := gpu.Init(lib); err != nil {
		return nil, nil, gpu.Inventory{}, nil, err
	}
	closeFn := func() { _ = lib.Shutdown() }
	inv, err := gpu.Discover(lib)
	if err != nil {
		closeFn()
		return nil, nil, gpu.Inventory{}, nil, fmt.Errorf("discovering GPUs: %w", err)
	}
	logger := klog.FromContext(ctx)
	for _, g := range inv.Skipped {
		logger.Info("Not publishing GPU", "index", g.Index, "uuid", g.UUID, "productName", g.ProductName, "reason", g.Reason)
	}
	return lib, mock, inv, closeFn, nil
}

// timeSlicer is nvidia-smi on a real node and a recorder on a simulated one.
func timeSlicer(o *Options) timeslice.Setter {
	if o.MockProfile != "" {
		return &timeslice.Recorder{Delay: o.MockTimeSliceDelay}
	}
	return timeslice.NvidiaSMI{Path: o.NvidiaSMI}
}
