package tiering

import (
	"context"
	"errors"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
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
	byNode    map[string][]nodeDevice
	byID      map[structured.DeviceID]*resourceapi.Device
	allocated sets.Set[structured.DeviceID]
	slices    []*resourceapi.ResourceSlice
	state     structured.AllocatedState
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
	inv := &inventory{
		byNode:    map[string][]nodeDevice{},
		byID:      map[structured.DeviceID]*resourceapi.Device{},
		allocated: sets.New[structured.DeviceID](),
		slices:    slices,
		state:     *state,
	}
	for id := range state.AllocatedDevices {
		inv.allocated.Insert(id)
	}
	for _, slice := range slices {
		for i := range slice.Spec.Devices {
			d := &slice.Spec.Devices[i]
			id := structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, d.Name)
			inv.byID[id] = d
			if slice.Spec.NodeName != nil {
				node := *slice.Spec.NodeName
				inv.byNode[node] = append(inv.byNode[node], nodeDevice{id: id, device: d})
			}
		}
	}
	return inv, nil
}

// blockingTaint returns the first taint on d that keeps new allocations
// away and that tolerations do not tolerate, or nil.
func blockingTaint(d *resourceapi.Device, tolerations []resourceapi.DeviceToleration) *resourceapi.DeviceTaint {
	for i := range d.Taints {
		taint := &d.Taints[i]
		if taint.Effect != resourceapi.DeviceTaintEffectNoSchedule && taint.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		tolerated := false
		for _, tol := range tolerations {
			if resourceclaim.ToleratesTaint(tol, *taint) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return taint
		}
	}
	return nil
}

// matcher evaluates a tier's DeviceClass and request selectors with the
// DRA library's CEL support, the same compiled programs the allocator uses.
type matcher struct {
	classExprs []string
	subExprs   []string
	cache      *cel.Cache
}

func (pl *Tiering) matcherFor(t tierChoice) (*matcher, error) {
	m := &matcher{subExprs: t.selectors, cache: pl.celCache}
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
	in := cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity}
	for _, expr := range m.classExprs {
		if ok, err := m.eval(ctx, expr, in); err != nil || !ok {
			return "device class selector " + expr, err
		}
	}
	for _, expr := range m.subExprs {
		if ok, err := m.eval(ctx, expr, in); err != nil || !ok {
			return expr, err
		}
	}
	return "", nil
}

func (m *matcher) eval(ctx context.Context, expr string, in cel.Device) (bool, error) {
	prog := m.cache.GetOrCompile(expr)
	if prog.Error != nil {
		return false, fmt.Errorf("compile %q: %w", expr, prog.Error)
	}
	ok, _, err := prog.DeviceMatches(ctx, in)
	if err != nil {
		// A selector that cannot be evaluated on a device (say, a missing
		// attribute) does not match it; the allocator treats it the same.
		return false, nil //nolint:nilerr // non-matching device, not a failure
	}
	return ok, nil
}
