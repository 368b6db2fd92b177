// Package preview answers, read-only, whether N more pods with given
// ResourceClaims fit the GPU pool now, and where they would go: it runs the
// real DRA structured allocator (k8s.io/dynamic-resource-allocation/structured)
// node by node against the current ResourceSlices and the devices already
// allocated, and puts each pod on the node the Tiering plugin would rank
// first, so a pool whose free GPUs are split across nodes (fragmentation)
// or that serves a pod from a fallback tier is answered correctly. It
// writes nothing; the scheduler still makes the real placement.
package preview

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// Inputs is a snapshot of the cluster's DRA state.
type Inputs struct {
	Nodes   []*v1.Node
	Slices  []*resourceapi.ResourceSlice
	Claims  []*resourceapi.ResourceClaim
	Classes []*resourceapi.DeviceClass
}

// Demand is Pods more pods, each needing fresh ResourceClaims with the specs
// in PodClaims (one entry per claim a pod gets from a template).
type Demand struct {
	PodClaims []resourceapi.ResourceClaimSpec
	Pods      int
}

// Reasons a pod finds no node (Placement.Shortage).
const (
	// ShortageCount: for some request of the pod, no acceptable tier has
	// enough free devices in the whole pool.
	ShortageCount = "count"
	// ShortageFragmentation: every request has enough free devices in the
	// pool, but no single node offers them all.
	ShortageFragmentation = "fragmentation"
)

// Result says whether the demand fits and where.
type Result struct {
	Fits bool
	// Nodes is the node chosen for each placed pod, in order.
	Nodes []string
	// Pods are every pod of the demands, in order, with where it goes.
	Pods []Placement
	// Message explains the answer with numbers.
	Message string
}

// Placement is where one pod of the demands goes.
type Placement struct {
	// Demand is the index of the pod's demand in the call, Pod its index
	// within that demand.
	Demand, Pod int
	// Node is the node the pod goes to, "" when none fits it.
	Node string
	// Devices are the devices its claims get, in the order of the claims
	// and their allocation results.
	Devices []Device
	// Claims are the pod's claims with the allocation found; nil when the
	// pod is not placed.
	Claims []*resourceapi.ResourceClaim
	// Shortage says why a pod that is not placed finds no node:
	// ShortageCount or ShortageFragmentation.
	Shortage string
}

// Device is one device given to a placed pod.
type Device struct {
	ID structured.DeviceID
	// Model is the device's model attribute, "" when it has none.
	Model string
	// Claim is the index of the pod's claim that got the device.
	Claim int
	// Request is the claim's request; Tier is the index of the
	// firstAvailable subrequest that got the device (0 for a request
	// without alternatives), of Tiers; TierName is that subrequest's name.
	Request  string
	Tier     int
	Tiers    int
	TierName string
}

// Previewer holds what can be reused across previews.
type Previewer struct {
	features structured.Features
	celCache *cel.Cache
	// matches remembers selector results per device object across
	// previews: callers hand the same slice objects again and again.
	matches *gpupool.MatchCache
	// slices keeps the index of the last slices previewed, rebuilt only
	// when other slice objects come.
	slices gpupool.SliceCache
}

// New returns a Previewer with the allocator features that Kubernetes 1.37
// enables by default for DRA.
func New() *Previewer {
	return &Previewer{
		features: structured.Features{
			AdminAccess:            true,
			ConsumableCapacity:     true,
			DeviceBindingAndStatus: true,
			DeviceTaints:           true,
			PartitionableDevices:   true,
			PrioritizedList:        true,
		},
		celCache: cel.NewCache(32, gpupool.DefaultCELFeatures()),
		matches:  gpupool.NewMatchCache(),
	}
}

// Check places the demands in order, pod by pod, each pod on the node the
// Tiering plugin would rank first (gpupool.CompareRanks: best tier, fewest
// stranded devices, name) among those where the allocator finds devices
// for all of the pod's claims, counting the devices given to earlier pods
// as taken. A pod no node fits is left out with the reason, and the pods
// after it are still placed. Several demands describe pods of different
// shapes (a LeaderWorkerSet's leaders and workers).
func (p *Previewer) Check(ctx context.Context, in Inputs, demands ...Demand) (Result, error) {
	total := 0
	for _, d := range demands {
		if len(d.PodClaims) > 0 && d.Pods > 0 {
			total += d.Pods
		}
	}
	if total == 0 {
		return Result{Fits: true, Message: "no devices needed"}, nil
	}
	pl := newPlacer(p, in)
	var res Result
	for di, d := range demands {
		if len(d.PodClaims) == 0 {
			continue
		}
		for i := 0; i < d.Pods; i++ {
			at, err := pl.place(ctx, podClaims(d.PodClaims, di, i))
			if err != nil {
				return Result{}, err
			}
			at.Demand, at.Pod = di, i
			if at.Node != "" {
				res.Nodes = append(res.Nodes, at.Node)
			}
			res.Pods = append(res.Pods, at)
		}
	}
	if len(res.Nodes) < total {
		res.Message = fmt.Sprintf("%d of %d pods fit; free devices per node: %s",
			len(res.Nodes), total, freeSummary(in.Slices, pl.taken.dedicated))
		return res, nil
	}
	res.Fits = true
	res.Message = fmt.Sprintf("%d pods fit on %s", total, strings.Join(res.Nodes, ", "))
	return res, nil
}

// taken is what allocations hold, split as the scheduler splits it: a
// device allocated without a share ID is the claim's alone; a share of a
// device that allows multiple allocations (consumable capacity) leaves the
// device to other claims within its remaining capacity.
type taken struct {
	dedicated sets.Set[structured.DeviceID]
	shares    sets.Set[structured.SharedDeviceID]
	capacity  structured.ConsumedCapacityCollection
}

func newTaken() *taken {
	return &taken{
		dedicated: sets.New[structured.DeviceID](),
		shares:    sets.New[structured.SharedDeviceID](),
		capacity:  structured.NewConsumedCapacityCollection(),
	}
}

func (t *taken) add(results []resourceapi.DeviceRequestAllocationResult) {
	for _, r := range results {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID == nil {
			t.dedicated.Insert(id)
			continue
		}
		t.shares.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
		if r.ConsumedCapacity != nil {
			t.capacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
		}
	}
}

func schedulableNodes(nodes []*v1.Node) []*v1.Node {
	out := make([]*v1.Node, 0, len(nodes))
	for _, n := range nodes {
		if !n.Spec.Unschedulable && n.DeletionTimestamp == nil {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func slicesByNode(slices []*resourceapi.ResourceSlice) (map[string][]*resourceapi.ResourceSlice, []*resourceapi.ResourceSlice) {
	byNode := map[string][]*resourceapi.ResourceSlice{}
	var shared []*resourceapi.ResourceSlice
	for _, s := range slices {
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			byNode[*s.Spec.NodeName] = append(byNode[*s.Spec.NodeName], s)
		} else if s.Spec.AllNodes != nil && *s.Spec.AllNodes || s.Spec.NodeSelector != nil {
			shared = append(shared, s)
		}
	}
	return byNode, shared
}

// podClaims builds the unallocated claims of the pod-th pod of a demand.
func podClaims(specs []resourceapi.ResourceClaimSpec, demand, pod int) []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, len(specs))
	for i := range specs {
		c := &resourceapi.ResourceClaim{Spec: *specs[i].DeepCopy()}
		c.Name = fmt.Sprintf("preview-%d-%d-%d", demand, pod, i)
		c.UID = types.UID(fmt.Sprintf("preview-uid-%d-%d-%d", demand, pod, i))
		out[i] = c
	}
	return out
}

// freeSummary lists, per node, how many published devices are not
// allocated; devices of slices bound to no single node count as "(shared)".
func freeSummary(slices []*resourceapi.ResourceSlice, allocated sets.Set[structured.DeviceID]) string {
	inv := gpupool.Inventory{Slices: gpupool.NewSlices(slices), Allocated: allocated}
	parts := make([]string, 0, len(inv.Nodes)+1)
	free := 0
	for _, s := range inv.SharedSlices() {
		for _, d := range s.Spec.Devices {
			if inv.Free(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
				free++
			}
		}
	}
	if len(inv.SharedSlices()) > 0 {
		parts = append(parts, fmt.Sprintf("(shared)=%d", free))
	}
	for _, node := range inv.Nodes {
		free := 0
		for _, nd := range inv.ByNode[node] {
			if inv.Free(nd.ID) {
				free++
			}
		}
		parts = append(parts, fmt.Sprintf("%s=%d", node, free))
	}
	if len(parts) == 0 {
		return "no ResourceSlices published"
	}
	return strings.Join(parts, ", ")
}

// ClassLister serves a list of DeviceClasses as the allocator's and the
// device matcher's class lister.
type ClassLister []*resourceapi.DeviceClass

// List returns the classes.
func (l ClassLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }

// Get returns the class of that name, or a NotFound error.
func (l ClassLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}
