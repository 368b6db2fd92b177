package gpupool

import (
	"sort"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// NodeDevice is one device published in a node-local ResourceSlice.
type NodeDevice struct {
	ID     structured.DeviceID
	Device *resourceapi.Device
}

// Slices is what the published slices say, indexed by node and device. It
// is built from informer objects, which are never modified in place, so a
// view stays valid for as long as the same slice objects are listed and is
// shared, read only, by every scheduling cycle until then (SliceCache).
type Slices struct {
	// Nodes are the nodes with node-local slices (with devices or not),
	// sorted.
	Nodes []string
	// ByNode are each node's devices, in slice name order.
	ByNode map[string][]NodeDevice
	// ByID are the devices of every slice, node-local or not.
	ByID map[structured.DeviceID]*resourceapi.Device
	// nodeSlices are the node-local slices by node; sharedSlices those
	// that are not bound to one node (node selector, all nodes).
	nodeSlices   map[string][]*resourceapi.ResourceSlice
	sharedSlices []*resourceapi.ResourceSlice
	// complexNodes are the nodes whose devices are not all plain (see
	// Plain).
	complexNodes map[string]bool
	// members identifies the slice objects the view was built from.
	members map[*resourceapi.ResourceSlice]struct{}
}

// NewSlices indexes slices. The slices are sorted by name first, so the
// devices of a node come in the same order whatever order they are listed in.
func NewSlices(slices []*resourceapi.ResourceSlice) *Slices {
	sorted := append([]*resourceapi.ResourceSlice(nil), slices...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	v := &Slices{
		ByNode:     map[string][]NodeDevice{},
		ByID:       map[structured.DeviceID]*resourceapi.Device{},
		nodeSlices: map[string][]*resourceapi.ResourceSlice{},
		members:    make(map[*resourceapi.ResourceSlice]struct{}, len(slices)),
	}
	for _, slice := range sorted {
		v.members[slice] = struct{}{}
		if slice.Spec.NodeName == nil {
			v.sharedSlices = append(v.sharedSlices, slice)
		} else {
			node := *slice.Spec.NodeName
			if _, ok := v.nodeSlices[node]; !ok {
				v.Nodes = append(v.Nodes, node)
			}
			v.nodeSlices[node] = append(v.nodeSlices[node], slice)
		}
		for i := range slice.Spec.Devices {
			d := &slice.Spec.Devices[i]
			id := structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, d.Name)
			v.ByID[id] = d
			if slice.Spec.NodeName != nil {
				node := *slice.Spec.NodeName
				v.ByNode[node] = append(v.ByNode[node], NodeDevice{ID: id, Device: d})
			}
		}
	}
	sort.Strings(v.Nodes)
	v.markComplexNodes(sorted)
	return v
}

// SlicesFor returns every slice that can offer devices to node: the slices
// not bound to one node, then the node's own.
func (v *Slices) SlicesFor(node string) []*resourceapi.ResourceSlice {
	local := v.nodeSlices[node]
	if len(v.sharedSlices) == 0 {
		return local
	}
	out := make([]*resourceapi.ResourceSlice, 0, len(local)+len(v.sharedSlices))
	return append(append(out, v.sharedSlices...), local...)
}

// HasSharedSlices reports whether some slice is not bound to one node.
func (v *Slices) HasSharedSlices() bool { return len(v.sharedSlices) > 0 }

// SharedSlices are the slices not bound to one node (node selector, all
// nodes, per-device node selection).
func (v *Slices) SharedSlices() []*resourceapi.ResourceSlice { return v.sharedSlices }

// builtFrom reports whether v indexes exactly the slice objects slices.
func (v *Slices) builtFrom(slices []*resourceapi.ResourceSlice) bool {
	if len(slices) != len(v.members) {
		return false
	}
	for _, s := range slices {
		if _, ok := v.members[s]; !ok {
			return false
		}
	}
	return true
}

// SliceCache keeps the last view. Building one walks every device of the
// cluster; scheduling cycles in a row nearly always list the same slice
// objects, and then checking their identity is enough. The zero value is
// ready to use; a nil cache builds a new view every time.
type SliceCache struct {
	mu   sync.Mutex
	view *Slices
}

// Get returns a view of slices, reusing the last one when it was built
// from exactly the same slice objects.
func (c *SliceCache) Get(slices []*resourceapi.ResourceSlice) *Slices {
	if c == nil {
		return NewSlices(slices)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view != nil && c.view.builtFrom(slices) {
		return c.view
	}
	c.view = NewSlices(slices)
	return c.view
}
