package quota

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// benchSizes are the cluster sizes the per-extension-point benchmarks
// compare: a cycle's cost must not grow from one to the other.
var benchSizes = []int{1000, 5000}

const benchDriver = "gpu.rota.dev"

// benchTracker is the claim tracker of a fake cluster: claims by
// namespace/name, and the pending allocations of DynamicResources' Reserve.
// Methods the plugin does not call are left to the nil embedded interface.
type benchTracker struct {
	fwk.ResourceClaimTracker
	claims  map[string]*resourceapi.ResourceClaim
	pending map[types.UID]*resourceapi.AllocationResult
}

func (t *benchTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := t.claims[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
}

func (t *benchTracker) List() ([]*resourceapi.ResourceClaim, error) {
	out := make([]*resourceapi.ResourceClaim, 0, len(t.claims))
	for _, c := range t.claims {
		out = append(out, c)
	}
	return out, nil
}

func (t *benchTracker) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return t.pending[uid]
}

func (t *benchTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	return &structured.AllocatedState{}, nil
}

type benchSlices struct{ slices []*resourceapi.ResourceSlice }

func (s benchSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return s.slices, nil
}

type benchDRA struct {
	fwk.SharedDRAManager
	tracker *benchTracker
	slices  benchSlices
}

func (d benchDRA) ResourceClaims() fwk.ResourceClaimTracker { return d.tracker }
func (d benchDRA) DeviceClasses() fwk.DeviceClassLister     { return benchClasses{} }

// benchClasses has the one class the claims name, selecting every device.
type benchClasses struct{}

func (benchClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if name != benchDriver {
		return nil, fmt.Errorf("device class %q not found", name)
	}
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: benchDriver}}, nil
}

func (c benchClasses) List() ([]*resourceapi.DeviceClass, error) {
	class, err := c.Get(benchDriver)
	return []*resourceapi.DeviceClass{class}, err
}
func (d benchDRA) ResourceSlices() fwk.ResourceSliceLister { return d.slices }

// benchWorld is a cluster with n allocated claims: ten of tenant team-a
// (limit 100 H100) on node n0's H100s, the rest spread over 50 other
// namespaces and n/8 other nodes of eight H100s each. The pod cand-0 of
// team-a has the claim cand, which DynamicResources' Reserve allocated
// gpu-0 of n0 (a pending allocation); the pod ext-0 has the claim
// DynamicResources wrote for its extended resources, allocated gpu-1 of n0.
func benchWorld(tb testing.TB, n int) (*Quota, *v1.Pod, *v1.Pod) {
	tb.Helper()
	tracker := &benchTracker{claims: map[string]*resourceapi.ResourceClaim{}, pending: map[types.UID]*resourceapi.AllocationResult{}}
	index := cache.NewIndexer(cache.MetaNamespaceKeyFunc, namespaceIndexers())
	add := func(c *resourceapi.ResourceClaim) {
		tracker.claims[c.Namespace+"/"+c.Name] = c
		if err := index.Add(c); err != nil {
			tb.Fatal(err)
		}
	}
	var slices []*resourceapi.ResourceSlice
	for node := range max(n/8, 1) {
		slices = append(slices, benchSlice(fmt.Sprintf("n%d", node), 8))
	}
	for i := range n {
		ns, node := fmt.Sprintf("other-%d", i%50), fmt.Sprintf("n%d", 1+(i/8)%max(n/8-1, 1))
		if i < 10 {
			ns, node = "team-a", "n0"
		}
		c := benchClaim(ns, fmt.Sprintf("c-%d", i))
		c.Status.Allocation = benchAllocation(node, fmt.Sprintf("gpu-%d", i%8))
		add(c)
	}
	cand := benchClaim("team-a", "cand")
	add(cand)
	tracker.pending[cand.UID] = benchAllocation("n0", "gpu-0")
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cand-0", UID: "cand-0-uid"},
		Spec:       v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("cand")}}},
	}
	ext := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ext-0", UID: "ext-0-uid"}}
	extClaim := benchClaim("team-a", "ext-0-extended-resources")
	extClaim.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	extClaim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: ext.Name, UID: ext.UID}}
	extClaim.Status.Allocation = benchAllocation("n0", "gpu-1")
	add(extClaim)

	args := &QuotaArgs{ModelAttribute: DefaultModelAttribute, Tenants: []TenantLimits{{Namespace: "team-a", Limits: map[string]int64{"H100": 100}}}}
	pl := &Quota{
		dra:      benchDRA{tracker: tracker, slices: benchSlices{slices: slices}},
		args:     args,
		caches:   gpupool.CachesOrNew(nil),
		claims:   &tenantClaims{index: index, claims: tracker},
		inFlight: map[types.UID]charge{},
		fromArgs: argTenants(args),
		live:     gpuquota.NewLive(),
	}
	table, _ := gpuquota.NewTable(nil, pl.fromArgs)
	pl.live.SetTable(table)
	return pl, pod, ext
}

func benchSlice(node string, gpus int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: benchDriver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		},
	}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("H100")}},
		})
	}
	return s
}

func benchClaim(ns, name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: benchDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
}

func benchAllocation(node, device string) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: benchDriver, Pool: node, Device: device,
	}}}}
}

// benchPoint runs one extension point at each size, in a cycle whose
// inventory (gpupool.CycleInventory, shared by the cycle's Rota plugins) was taken
// once, outside the timer.
func benchPoint(b *testing.B, run func(ctx context.Context, pl *Quota, cs fwk.CycleState, pod, ext *v1.Pod) *fwk.Status) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			ctx := klog.NewContext(context.Background(), logr.Discard())
			pl, pod, ext := benchWorld(b, n)
			cs := framework.NewCycleState()
			inv, err := gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices)
			if err != nil {
				b.Fatal(err)
			}
			requests, err := gpupool.PodRequests(pl.dra, pod)
			if err != nil {
				b.Fatal(err)
			}
			cs.Write(preFilterStateKey, &preFilterState{tenant: pl.tenant("team-a"), inv: inv, requests: requests})
			b.ResetTimer()
			for b.Loop() {
				if st := run(ctx, pl, cs, pod, ext); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}

// BenchmarkPreFilterUsage is what PreFilter reads besides the cycle's
// pool: the tenant's usage.
func BenchmarkPreFilterUsage(b *testing.B) {
	benchPoint(b, func(_ context.Context, pl *Quota, cs fwk.CycleState, pod, _ *v1.Pod) *fwk.Status {
		s, err := getState(cs)
		if err != nil {
			return fwk.AsStatus(err)
		}
		pl.mu.Lock()
		defer pl.mu.Unlock()
		use, err := pl.usageLocked(pod.Namespace, s.inv, nil)
		if err != nil || use["H100"] != 11 {
			return fwk.NewStatus(fwk.Error, fmt.Sprintf("usage %v, %v; want 11 H100", use, err))
		}
		return nil
	})
}

// BenchmarkPreFilter is the whole PreFilter of a limited tenant's pod: its
// requests and matchers, the tenant's usage and the check that some tier
// is within the limits (the models a tier matches come from the cache
// after the first cycle), in a cycle whose inventory Tiering already took.
func BenchmarkPreFilter(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			ctx := klog.NewContext(context.Background(), logr.Discard())
			pl, pod, _ := benchWorld(b, n)
			pl.models = &tierModels{}
			cs := framework.NewCycleState()
			if _, err := gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, st := pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}

// BenchmarkReserve charges the pending allocation of the pod's claim
// against the tenant's usage.
func BenchmarkReserve(b *testing.B) {
	benchPoint(b, func(ctx context.Context, pl *Quota, cs fwk.CycleState, pod, _ *v1.Pod) *fwk.Status {
		st := pl.Reserve(ctx, cs, pod, "n0")
		pl.Unreserve(ctx, cs, pod, "n0")
		return st
	})
}

// BenchmarkPreBind is the extended-resource PreBind: find the claim
// DynamicResources wrote for the pod and charge it.
func BenchmarkPreBind(b *testing.B) {
	benchPoint(b, func(ctx context.Context, pl *Quota, cs fwk.CycleState, _, ext *v1.Pod) *fwk.Status {
		return pl.PreBind(ctx, cs, ext, "n0")
	})
}
