package controller

import (
	"cmp"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// GPU is one device of driver gpu.rota.dev on the reservation's node, as the
// controller sees it when choosing and watching the GPUs it holds.
type GPU struct {
	Pool      string
	Device    string
	UUID      string
	Model     string
	Index     int64
	MemoryMiB int64
	// Healthy is false while the driver taints the GPU unhealthy with an
	// effect that keeps claims away (NoSchedule or NoExecute).
	Healthy bool
	// Allocated is true while any claim holds the GPU.
	Allocated bool
	// ReservedBy is the gpuv1.ReservedTaintValue (<namespace>.<name>) of the reservation whose rule taints the
	// GPU, "" when none does.
	ReservedBy string
}

// deviceKey locates a device among the driver's pools.
type deviceKey struct{ pool, device string }

// NodeGPUs lists the GPUs the driver publishes for node, in index order
// (then pool and device name), marking allocation and reservation by others.
// claims are every claim of the cluster; rules every DeviceTaintRule. The
// GPUs are read from the pool model (pkg/gpupool).
func NodeGPUs(node string, sliceList []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim, rules []*resourceapi.DeviceTaintRule) []GPU {
	var local []*resourceapi.ResourceSlice
	for _, s := range sliceList {
		if s.Spec.Driver == gpuv1.DriverName && s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			local = append(local, s)
		}
	}
	pool := gpupool.NewPool(local, claims, nil)
	reserved := gpupool.ReservedByRules(rules, gpuv1.DriverName)
	out := make([]GPU, 0, len(pool.ByNode[node]))
	for _, d := range pool.ByNode[node] {
		g := GPU{Pool: d.ID.Pool.String(), Device: d.ID.Device.String(), UUID: d.UUID(), Model: d.Model(),
			Healthy: d.Healthy(), Allocated: d.Allocated, ReservedBy: reserved[d.ID]}
		g.Index, _ = gpupool.IntAttribute(d.Device, gpuv1.DriverName, gpuv1.AttributeIndex)
		if c, ok := d.Device.Capacity[gpuv1.CapacityMemory]; ok {
			g.MemoryMiB = c.Value.Value() >> 20
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b GPU) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Device, b.Device))
	})
	return out
}
