package gpupool

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Shared reports whether several claims may be allocated the device, each
// consuming part of its capacity.
func (d *Device) Shared() bool {
	return d.Device.AllowMultipleAllocations != nil && *d.Device.AllowMultipleAllocations
}

// FreeFor reports whether a new claim of tier t could be given the device:
// a whole device must be unallocated; a shared one must have room for what
// t consumes of each of its capacities, after what allocated and in-flight
// claims consume. What t consumes follows the allocator: the amount t
// requests (at least the policy's minimum), else the policy's default, else
// the whole capacity. Rounding to a policy's step is left to the allocator,
// so a device this accepts may still be refused for a few bytes.
func (d *Device) FreeFor(t Tier) bool {
	if !d.Shared() {
		return !d.Allocated
	}
	for name, c := range d.Device.Capacity {
		need := consumes(c, t.Capacity, name)
		if used, ok := d.Consumed[name]; ok && used != nil {
			need.Add(*used)
		}
		if need.Cmp(c.Value) > 0 {
			return false
		}
	}
	return true
}

// consumes is what a request asking requests takes of capacity name.
func consumes(c resourceapi.DeviceCapacity, requests map[resourceapi.QualifiedName]resource.Quantity, name resourceapi.QualifiedName) resource.Quantity {
	q, asked := requests[name]
	switch {
	case !asked && c.RequestPolicy != nil && c.RequestPolicy.Default != nil:
		return c.RequestPolicy.Default.DeepCopy()
	case !asked:
		return c.Value.DeepCopy()
	}
	if p := c.RequestPolicy; p != nil && p.ValidRange != nil && p.ValidRange.Min != nil && q.Cmp(*p.ValidRange.Min) < 0 {
		return p.ValidRange.Min.DeepCopy()
	}
	return q.DeepCopy()
}

// setConsumed records, for each shared device, what allocated and
// in-flight claims consume of it (the allocated state's aggregate).
func (p *Pool) setConsumed(consumed structured.ConsumedCapacityCollection) {
	for id, c := range consumed {
		if d, ok := p.ByID[id]; ok {
			d.Consumed = c
		}
	}
}
