package gpupool

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Plain reports whether every device node publishes is a plain, whole
// device that the allocator treats as either free or allocated, with nothing
// else to consider: no shared or partitionable devices, no node binding or
// per-device node selection, every pool complete and of one generation, no
// device name repeated. Tiering ranks such nodes by counting devices (its
// fast path, docs/benchmarks.md); the others go to the allocator.
func (v *Slices) Plain(node string) bool { return !v.complexNodes[node] }

// plainDevice reports whether the allocator treats d as a plain, whole
// device that is either free or allocated, with nothing else to consider.
func plainDevice(d *resourceapi.Device) bool {
	return len(d.ConsumesCounters) == 0 &&
		(d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations) &&
		(d.BindsToNode == nil || !*d.BindsToNode) &&
		len(d.BindingConditions) == 0 && len(d.BindingFailureConditions) == 0 &&
		d.NodeName == nil && d.NodeSelector == nil && (d.AllNodes == nil || !*d.AllNodes)
}

// markComplexNodes records the nodes that are not Plain: a device that is
// not plain, a pool whose slices are from more than one generation or not
// all present (the allocator then reasons about the pool as a whole), or a
// repeated device name.
func (v *Slices) markComplexNodes(slices []*resourceapi.ResourceSlice) {
	type poolKey struct{ driver, pool string }
	type poolSeen struct {
		generation int64
		want       int64
		slices     int64
		mixed      bool
	}
	pools := map[string]map[poolKey]*poolSeen{}
	v.complexNodes = map[string]bool{}
	for _, slice := range slices {
		if slice.Spec.NodeName == nil {
			continue
		}
		node := *slice.Spec.NodeName
		if pools[node] == nil {
			pools[node] = map[poolKey]*poolSeen{}
		}
		k := poolKey{slice.Spec.Driver, slice.Spec.Pool.Name}
		p := pools[node][k]
		if p == nil {
			p = &poolSeen{generation: slice.Spec.Pool.Generation, want: slice.Spec.Pool.ResourceSliceCount}
			pools[node][k] = p
		}
		if p.generation != slice.Spec.Pool.Generation || p.want != slice.Spec.Pool.ResourceSliceCount {
			p.mixed = true
		}
		p.slices++
		if slice.Spec.PerDeviceNodeSelection != nil && *slice.Spec.PerDeviceNodeSelection {
			v.complexNodes[node] = true
		}
		for i := range slice.Spec.Devices {
			if !plainDevice(&slice.Spec.Devices[i]) {
				v.complexNodes[node] = true
			}
		}
	}
	for node, byPool := range pools {
		for _, p := range byPool {
			if p.mixed || p.slices != p.want {
				v.complexNodes[node] = true
			}
		}
		seen := map[structured.DeviceID]bool{}
		for _, nd := range v.ByNode[node] {
			if seen[nd.ID] {
				v.complexNodes[node] = true
			}
			seen[nd.ID] = true
		}
	}
}
