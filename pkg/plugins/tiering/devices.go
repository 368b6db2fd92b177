package tiering

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// nodeDevice is one device published in a node-local ResourceSlice.
type nodeDevice struct {
	id     structured.DeviceID
	device *resourceapi.Device
}

// inventory is a per-cycle view of the devices: which node publishes
// which, and which are already allocated (or allocation is in flight).
type inventory struct {
	*sliceView
	// allocated is the allocated state's device set, read only.
	allocated sets.Set[structured.DeviceID]
	state     structured.AllocatedState
}

// sliceView is what the published slices say, indexed for ranking. It is
// built from informer objects, which are never modified in place, so a
// view stays valid for as long as the same slice objects are listed and is
// shared, read only, by every cycle until then.
type sliceView struct {
	byNode map[string][]nodeDevice
	byID   map[structured.DeviceID]*resourceapi.Device
	slices []*resourceapi.ResourceSlice
	// nodeSlices are the node-local slices by node; sharedSlices those
	// that are not bound to one node (node selector, all nodes).
	nodeSlices   map[string][]*resourceapi.ResourceSlice
	sharedSlices []*resourceapi.ResourceSlice
	// complexNodes are the nodes the fast path must leave to the
	// allocator (see fastpath.go).
	complexNodes map[string]bool
	// members identifies the slice objects the view was built from.
	members map[*resourceapi.ResourceSlice]struct{}
}

// sliceViewCache keeps the last view. Building one walks every device of
// the cluster; scheduling cycles in a row nearly always list the same
// slice objects, and then checking their identity is enough.
type sliceViewCache struct {
	mu   sync.Mutex
	view *sliceView
}

// get returns a view of slices, reusing the last one when it was built
// from exactly the same slice objects.
func (c *sliceViewCache) get(slices []*resourceapi.ResourceSlice) *sliceView {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view != nil && c.view.builtFrom(slices) {
		return c.view
	}
	c.view = newSliceView(slices)
	return c.view
}

func (v *sliceView) builtFrom(slices []*resourceapi.ResourceSlice) bool {
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

func newSliceView(slices []*resourceapi.ResourceSlice) *sliceView {
	v := &sliceView{
		byNode:     map[string][]nodeDevice{},
		byID:       map[structured.DeviceID]*resourceapi.Device{},
		slices:     slices,
		nodeSlices: map[string][]*resourceapi.ResourceSlice{},
		members:    make(map[*resourceapi.ResourceSlice]struct{}, len(slices)),
	}
	for _, slice := range slices {
		v.members[slice] = struct{}{}
		if slice.Spec.NodeName != nil {
			v.nodeSlices[*slice.Spec.NodeName] = append(v.nodeSlices[*slice.Spec.NodeName], slice)
		} else {
			v.sharedSlices = append(v.sharedSlices, slice)
		}
		for i := range slice.Spec.Devices {
			d := &slice.Spec.Devices[i]
			id := structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, d.Name)
			v.byID[id] = d
			if slice.Spec.NodeName != nil {
				node := *slice.Spec.NodeName
				v.byNode[node] = append(v.byNode[node], nodeDevice{id: id, device: d})
			}
		}
	}
	v.markComplexNodes()
	return v
}

// slicesFor returns every slice that can offer devices to node.
func (v *sliceView) slicesFor(node string) []*resourceapi.ResourceSlice {
	local := v.nodeSlices[node]
	if len(v.sharedSlices) == 0 {
		return local
	}
	out := make([]*resourceapi.ResourceSlice, 0, len(local)+len(v.sharedSlices))
	return append(append(out, v.sharedSlices...), local...)
}

// snapshotInventory reads slices (with DeviceTaintRules applied) and the
// allocated state from the shared DRA manager, the same inputs
// DynamicResources gives its allocator.
func (pl *Tiering) snapshotInventory(ctx context.Context) (*inventory, error) {
	var state *structured.AllocatedState
	// The claim tracker reports concurrent modification as an error; like
	// DynamicResources, try again briefly.
	err := wait.PollUntilContextTimeout(ctx, time.Microsecond, 5*time.Second, true, func(context.Context) (bool, error) {
		s, err := pl.dra.ResourceClaims().GatherAllocatedState()
		if err != nil {
			return false, nil //nolint:nilerr // retried until timeout
		}
		if s == nil {
			return false, errors.New("nil allocated state")
		}
		state = s
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("gather allocated devices: %w", err)
	}
	slices, err := pl.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	allocated := state.AllocatedDevices
	if allocated == nil {
		allocated = sets.New[structured.DeviceID]()
	}
	return &inventory{sliceView: pl.views.get(slices), allocated: allocated, state: *state}, nil
}

// matcher evaluates a tier's DeviceClass and request selectors with the
// DRA library's CEL support, the same compiled programs the allocator uses.
type matcher struct {
	classExprs []string
	subExprs   []string
	cache      *cel.Cache
	results    *matchCache
}

// matchCache remembers selector results per device object. The slice
// tracker hands out the same *Device until its slice changes, so a key
// can never go stale; the cache is simply emptied when it grows large.
type matchCache struct {
	mu      sync.RWMutex
	results map[matchKey]bool
}

type matchKey struct {
	device *resourceapi.Device
	expr   string
}

const maxCachedMatches = 1 << 18

func newMatchCache() *matchCache { return &matchCache{results: map[matchKey]bool{}} }

func (c *matchCache) get(k matchKey) (matched, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	matched, ok = c.results[k]
	return matched, ok
}

func (c *matchCache) put(k matchKey, matched bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.results) >= maxCachedMatches {
		clear(c.results)
	}
	c.results[k] = matched
}

func (pl *Tiering) matcherFor(t tierChoice) (*matcher, error) {
	m := &matcher{subExprs: t.selectors, cache: pl.celCache, results: pl.matches}
	class, err := pl.dra.DeviceClasses().Get(t.className)
	if err != nil {
		return nil, fmt.Errorf("device class %q: %w", t.className, err)
	}
	for _, sel := range class.Spec.Selectors {
		if sel.CEL != nil {
			m.classExprs = append(m.classExprs, sel.CEL.Expression)
		}
	}
	return m, nil
}

// firstFailing returns "" when the device matches, else the expression
// (or class) that rejects it.
func (m *matcher) firstFailing(ctx context.Context, driver string, d *resourceapi.Device) (string, error) {
	for _, expr := range m.classExprs {
		if ok, err := m.eval(ctx, expr, driver, d); err != nil || !ok {
			return "device class selector " + expr, err
		}
	}
	for _, expr := range m.subExprs {
		if ok, err := m.eval(ctx, expr, driver, d); err != nil || !ok {
			return expr, err
		}
	}
	return "", nil
}

func (m *matcher) eval(ctx context.Context, expr, driver string, d *resourceapi.Device) (bool, error) {
	key := matchKey{device: d, expr: expr}
	if matched, ok := m.results.get(key); ok {
		return matched, nil
	}
	matched, err := m.evalCEL(ctx, expr, cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
	if err != nil {
		return false, err
	}
	m.results.put(key, matched)
	return matched, nil
}

func (m *matcher) evalCEL(ctx context.Context, expr string, in cel.Device) (bool, error) {
	prog := m.cache.GetOrCompile(expr)
	if prog.Error != nil {
		return false, fmt.Errorf("compile %q: %w", expr, prog.Error)
	}
	ok, _, err := prog.DeviceMatches(ctx, in)
	if err != nil {
		// A selector that cannot be evaluated on a device (say, a missing
		// attribute) does not offer it to this tier: Tiering only counts
		// devices, the allocator reports such errors.
		return false, nil //nolint:nilerr // non-matching device, not a failure
	}
	return ok, nil
}
