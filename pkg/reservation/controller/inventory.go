package controller

import (
	"cmp"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
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
	// ReservedBy is the reservation.TaintValue (<namespace>.<name>) of the reservation whose rule taints the
	// GPU, "" when none does.
	ReservedBy string
}

// deviceKey locates a device among the driver's pools.
type deviceKey struct{ pool, device string }

// NodeGPUs lists the GPUs the driver publishes for node, in index order
// (then pool and device name), marking allocation and reservation by others.
// claims are every claim of the cluster; rules every DeviceTaintRule.
func NodeGPUs(node string, sliceList []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim, rules []*resourceapi.DeviceTaintRule) []GPU {
	allocated := map[deviceKey]bool{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == gpuv1.DriverName {
				allocated[deviceKey{r.Pool, r.Device}] = true
			}
		}
	}
	reserved := map[deviceKey]string{}
	for _, r := range rules {
		sel := r.Spec.DeviceSelector
		if r.Spec.Taint.Key != gpuv1.ReservedTaintKey || sel == nil || sel.Pool == nil || sel.Device == nil {
			continue
		}
		if sel.Driver != nil && *sel.Driver != gpuv1.DriverName {
			continue
		}
		reserved[deviceKey{*sel.Pool, *sel.Device}] = r.Spec.Taint.Value
	}
	var out []GPU
	for _, s := range sliceList {
		if s.Spec.Driver != gpuv1.DriverName || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
			continue
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			g := GPU{Pool: s.Spec.Pool.Name, Device: d.Name, Healthy: true}
			if a, ok := d.Attributes[gpuv1.AttributeUUID]; ok && a.StringValue != nil {
				g.UUID = *a.StringValue
			}
			if a, ok := d.Attributes[gpuv1.AttributeModel]; ok && a.StringValue != nil {
				g.Model = *a.StringValue
			}
			if a, ok := d.Attributes[gpuv1.AttributeIndex]; ok && a.IntValue != nil {
				g.Index = *a.IntValue
			}
			if c, ok := d.Capacity[gpuv1.CapacityMemory]; ok {
				g.MemoryMiB = c.Value.Value() >> 20
			}
			for _, t := range d.Taints {
				if t.Key == gpuv1.UnhealthyTaintKey && t.Effect != resourceapi.DeviceTaintEffectNone {
					g.Healthy = false
				}
			}
			k := deviceKey{g.Pool, g.Device}
			g.Allocated = allocated[k]
			g.ReservedBy = reserved[k]
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b GPU) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Device, b.Device))
	})
	return out
}
