package waits

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Device is one device of a node-local ResourceSlice as the pool sees it.
type Device struct {
	ID        structured.DeviceID
	Node      string
	Device    *resourceapi.Device
	Allocated bool
	// Holders are the pods the device's claim is reserved for.
	Holders []types.NamespacedName
	// HolderClaim is the claim the device is allocated to, if any.
	HolderClaim types.NamespacedName
	// Consumed is what claims consume of a shared device's capacities.
	Consumed structured.ConsumedCapacity
}

// Model is the device's model attribute ("H100"), or "" if it has none.
func (d *Device) Model() string {
	return StringAttribute(d.Device, d.ID.Driver.String(), gpuv1.AttributeModel)
}

// UUID is the device's uuid attribute, or "".
func (d *Device) UUID() string {
	return StringAttribute(d.Device, d.ID.Driver.String(), gpuv1.AttributeUUID)
}

// Pool is a point-in-time view of the node-local devices and of which are
// allocated (or have an allocation in flight), read from the scheduler's
// shared DRA manager: the same inputs the allocator sees.
type Pool struct {
	Nodes  []string // sorted
	ByNode map[string][]*Device
	ByID   map[structured.DeviceID]*Device
}

// Snapshot reads the pool from the scheduler's shared DRA manager,
// including what in-flight allocations consume of shared devices.
func Snapshot(ctx context.Context, dra fwk.SharedDRAManager) (*Pool, error) {
	var state *structured.AllocatedState
	// The claim tracker reports concurrent modification as an error; try
	// again briefly, as DynamicResources does.
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		s, err := dra.ResourceClaims().GatherAllocatedState()
		if err != nil || s == nil {
			return false, nil //nolint:nilerr // retried until timeout
		}
		state = s
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("gather allocated devices: %w", err)
	}
	slices, err := dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	claims, err := dra.ResourceClaims().List()
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	p := NewPool(slices, claims, state.AllocatedDevices)
	p.setConsumed(state.AggregatedCapacity)
	return p, nil
}

// NewPool builds a pool from slices, claims (for holders) and the set of
// allocated device IDs (which includes in-flight allocations).
func NewPool(slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim, allocated sets.Set[structured.DeviceID]) *Pool {
	p := &Pool{ByNode: map[string][]*Device{}, ByID: map[structured.DeviceID]*Device{}}
	sorted := append([]*resourceapi.ResourceSlice(nil), slices...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, s := range sorted {
		if s.Spec.NodeName == nil {
			continue
		}
		node := *s.Spec.NodeName
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			id := structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)
			dev := &Device{ID: id, Node: node, Device: d, Allocated: allocated.Has(id)}
			if _, ok := p.ByNode[node]; !ok {
				p.Nodes = append(p.Nodes, node)
			}
			p.ByNode[node] = append(p.ByNode[node], dev)
			p.ByID[id] = dev
		}
	}
	sort.Strings(p.Nodes)
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		var holders []types.NamespacedName
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" {
				holders = append(holders, types.NamespacedName{Namespace: c.Namespace, Name: r.Name})
			}
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if dev, ok := p.ByID[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]; ok {
				dev.Allocated = true
				dev.Holders = holders
				dev.HolderClaim = types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
				if dev.Shared() && len(r.ConsumedCapacity) > 0 {
					if dev.Consumed == nil {
						dev.Consumed = structured.ConsumedCapacity{}
					}
					for name, q := range r.ConsumedCapacity {
						dev.Consumed.Add(structured.ConsumedCapacity{name: &q})
					}
				}
			}
		}
	}
	return p
}

// BlockingTaint returns the first NoSchedule/NoExecute taint of d that the
// tolerations do not tolerate, or nil.
func BlockingTaint(d *resourceapi.Device, tolerations []resourceapi.DeviceToleration) *resourceapi.DeviceTaint {
	for i := range d.Taints {
		t := &d.Taints[i]
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		tolerated := false
		for _, tol := range tolerations {
			if resourceclaim.ToleratesTaint(tol, *t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return t
		}
	}
	return nil
}

// StringAttribute reads an attribute by its bare or driver-qualified name.
func StringAttribute(d *resourceapi.Device, driver string, name resourceapi.QualifiedName) string {
	for _, key := range []resourceapi.QualifiedName{name, resourceapi.QualifiedName(driver + "/" + string(name))} {
		if a, ok := d.Attributes[key]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return ""
}

// Tier is one way to satisfy a request: a subrequest of a firstAvailable
// list, or the request itself.
type Tier struct {
	Name        string
	Class       string
	Selectors   []string
	Count       int64
	All         bool
	Tolerations []resourceapi.DeviceToleration
	// Capacity is what the tier requests of each capacity of a shared
	// device (capacity.requests).
	Capacity map[resourceapi.QualifiedName]resource.Quantity
}

// Request is one request of one of the pod's unallocated claims.
type Request struct {
	Claim *resourceapi.ResourceClaim
	Name  string
	Tiers []Tier
	// Tiered is true for firstAvailable requests.
	Tiered bool
}

// PodRequests returns the requests of the pod's claims that still need an
// allocation. Claims not created yet are reported as an error.
func PodRequests(dra fwk.SharedDRAManager, pod *v1.Pod) ([]Request, error) {
	var out []Request
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, fmt.Errorf("claim %q: %w", pod.Spec.ResourceClaims[i].Name, err)
		}
		if name == nil {
			continue
		}
		claim, err := dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			return nil, fmt.Errorf("claim %s/%s: %w", pod.Namespace, *name, err)
		}
		if claim.Status.Allocation != nil {
			continue
		}
		out = append(out, ClaimRequests(claim)...)
	}
	return out, nil
}

// ClaimRequests returns the requests of one claim with their tiers.
func ClaimRequests(claim *resourceapi.ResourceClaim) []Request {
	var out []Request
	for _, req := range claim.Spec.Devices.Requests {
		r := Request{Claim: claim, Name: req.Name}
		switch {
		case req.Exactly != nil:
			r.Tiers = []Tier{tierOf(req.Name, req.Exactly.DeviceClassName, req.Exactly.Selectors, req.Exactly.AllocationMode, req.Exactly.Count, req.Exactly.Tolerations, req.Exactly.Capacity)}
		case len(req.FirstAvailable) > 0:
			r.Tiered = true
			for _, sub := range req.FirstAvailable {
				r.Tiers = append(r.Tiers, tierOf(sub.Name, sub.DeviceClassName, sub.Selectors, sub.AllocationMode, sub.Count, sub.Tolerations, sub.Capacity))
			}
		default:
			continue
		}
		out = append(out, r)
	}
	return out
}

func tierOf(name, class string, sels []resourceapi.DeviceSelector, mode resourceapi.DeviceAllocationMode, count int64, tol []resourceapi.DeviceToleration, capacity *resourceapi.CapacityRequirements) Tier {
	t := Tier{Name: name, Class: class, Count: count, All: mode == resourceapi.DeviceAllocationModeAll, Tolerations: tol}
	if capacity != nil {
		t.Capacity = capacity.Requests
	}
	if t.Count == 0 {
		t.Count = 1
	}
	for _, s := range sels {
		if s.CEL != nil {
			t.Selectors = append(t.Selectors, s.CEL.Expression)
		}
	}
	return t
}

// Matcher evaluates a tier's class and selectors on devices.
type Matcher struct {
	exprs []string
	cache *cel.Cache
}

// NewCELCache returns a cache for Matchers, with the CEL features the
// scheduler enables by default.
func NewCELCache() *cel.Cache {
	return cel.NewCache(64, cel.Features{EnableConsumableCapacity: true})
}

// ErrNoClass is returned by NewMatcher when the tier's DeviceClass is missing.
var ErrNoClass = errors.New("device class not found")

// NewMatcher compiles the tier's class and request selectors.
func NewMatcher(dra fwk.SharedDRAManager, cache *cel.Cache, t Tier) (*Matcher, error) {
	m := &Matcher{cache: cache}
	class, err := dra.DeviceClasses().Get(t.Class)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrNoClass, t.Class, err)
	}
	for _, s := range class.Spec.Selectors {
		if s.CEL != nil {
			m.exprs = append(m.exprs, s.CEL.Expression)
		}
	}
	m.exprs = append(m.exprs, t.Selectors...)
	return m, nil
}

// Matches reports whether the device satisfies every selector. A selector
// that cannot be evaluated on the device (missing attribute) does not match.
func (m *Matcher) Matches(ctx context.Context, d *Device) bool {
	in := cel.Device{Driver: d.ID.Driver.String(), AllowMultipleAllocations: d.Device.AllowMultipleAllocations, Attributes: d.Device.Attributes, Capacity: d.Device.Capacity}
	for _, e := range m.exprs {
		prog := m.cache.GetOrCompile(e)
		if prog.Error != nil {
			return false
		}
		ok, _, err := prog.DeviceMatches(ctx, in)
		if err != nil || !ok {
			return false
		}
	}
	return true
}
