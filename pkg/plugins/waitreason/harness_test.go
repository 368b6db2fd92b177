package waitreason

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/waits"
)

// fakeTracker is the claim tracker of a fake cluster. Methods WaitReason
// does not call are left to the nil embedded interface.
type fakeTracker struct {
	fwk.ResourceClaimTracker
	claims map[string]*resourceapi.ResourceClaim
	// state is the allocated state, gathered once until a claim changes
	// (set): the scheduler's tracker keeps it as claims change, and a
	// cycle's inventory is taken before WaitReason runs.
	state *structured.AllocatedState
}

// set changes a claim.
func (t *fakeTracker) set(c *resourceapi.ResourceClaim) {
	t.claims[c.Namespace+"/"+c.Name] = c
	t.state = nil
}

func (t *fakeTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := t.claims[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
}

func (t *fakeTracker) List() ([]*resourceapi.ResourceClaim, error) {
	out := make([]*resourceapi.ResourceClaim, 0, len(t.claims))
	for _, c := range t.claims {
		out = append(out, c)
	}
	return out, nil
}

func (t *fakeTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	if t.state != nil {
		return t.state, nil
	}
	allocated := sets.New[structured.DeviceID]()
	for _, c := range t.claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			allocated.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	t.state = &structured.AllocatedState{AllocatedDevices: allocated}
	return t.state, nil
}

type fakeSlices struct{ slices []*resourceapi.ResourceSlice }

func (s fakeSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return s.slices, nil
}

type fakeClasses struct{}

func (fakeClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if name != gpuv1.DriverName {
		return nil, fmt.Errorf("device class %q not found", name)
	}
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

func (c fakeClasses) List() ([]*resourceapi.DeviceClass, error) {
	class, err := c.Get(gpuv1.DriverName)
	return []*resourceapi.DeviceClass{class}, err
}

type fakeDRA struct {
	fwk.SharedDRAManager
	tracker *fakeTracker
	slices  fakeSlices
}

func (d fakeDRA) ResourceClaims() fwk.ResourceClaimTracker { return d.tracker }
func (d fakeDRA) ResourceSlices() fwk.ResourceSliceLister  { return d.slices }
func (d fakeDRA) DeviceClasses() fwk.DeviceClassLister     { return fakeClasses{} }

// fakeHandle gives the plugin the scheduler's node snapshot.
type fakeHandle struct {
	fwk.Handle
	snapshot *internalcache.Snapshot
}

func (h fakeHandle) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

// world is a cluster of nodes × 8 GPUs, H100, A100 and L4 nodes in turn,
// every H100 and A100 held by an eight-GPU claim of a running pod, and a
// pod "wait" in namespace ml whose claim asks for 4 H100, else 4 A100:
// it waits for capacity.
type world struct {
	pl       *WaitReason
	pod      *v1.Pod
	statuses *framework.NodeToStatus
	tracker  *fakeTracker
	claims   cache.Indexer
	pods     cache.Indexer
}

func modelOf(node int) string { return []string{"H100", "A100", "L4"}[node%3] }

func newWorld(tb testing.TB, nodes int) *world {
	tb.Helper()
	w := &world{
		tracker:  &fakeTracker{claims: map[string]*resourceapi.ResourceClaim{}},
		claims:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{gpupool.ClaimsByDeviceIndex: gpupool.ClaimDeviceKeys}),
		pods:     cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		statuses: framework.NewDefaultNodeToStatus(),
	}
	var slices []*resourceapi.ResourceSlice
	var nodeObjs []*v1.Node
	for n := range nodes {
		name := fmt.Sprintf("node-%05d", n)
		nodeObjs = append(nodeObjs, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
			Driver: gpuv1.DriverName, NodeName: ptr.To(name), Pool: resourceapi.ResourcePool{Name: name, ResourceSliceCount: 1}}}
		var results []resourceapi.DeviceRequestAllocationResult
		for i := range 8 {
			d := fmt.Sprintf("gpu-%d", i)
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				gpuv1.AttributeModel: {StringValue: ptr.To(modelOf(n))}}})
			results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuv1.DriverName, Pool: name, Device: d})
		}
		slices = append(slices, s)
		w.statuses.Set(name, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "cannot allocate all claims").WithPlugin(dynamicresources.Name))
		if modelOf(n) == "L4" {
			continue
		}
		job := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: "job-" + name}, Spec: v1.PodSpec{NodeName: name}}
		w.add(tb, job, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: "job-" + name}, Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: job.Name}},
		}})
	}
	model := func(m string) []resourceapi.DeviceSelector {
		return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(`device.attributes[%q].model == %q`, gpuv1.DriverName, m)}}}
	}
	w.pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "wait", UID: "wait-uid"},
		Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("wait")}}}}
	w.add(tb, w.pod, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "wait"}, Spec: resourceapi.ResourceClaimSpec{
		Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "h100", DeviceClassName: gpuv1.DriverName, Count: 4, Selectors: model("H100")},
			{Name: "a100", DeviceClassName: gpuv1.DriverName, Count: 4, Selectors: model("A100")},
		}}}}}})
	dra := fakeDRA{tracker: w.tracker, slices: fakeSlices{slices: slices}}
	w.pl = &WaitReason{
		handle:     fakeHandle{snapshot: internalcache.NewSnapshot(nil, nodeObjs)},
		dra:        dra,
		pods:       corelisters.NewPodLister(w.pods),
		pdbs:       policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})),
		caches:     gpupool.CachesOrNew(nil),
		claimIndex: w.claims,
		verdicts:   newVerdicts(),
	}
	return w
}

// add puts a pod and its claim into the fake cluster.
func (w *world) add(tb testing.TB, pod *v1.Pod, claim *resourceapi.ResourceClaim) {
	tb.Helper()
	w.tracker.set(claim)
	if err := w.claims.Add(claim); err != nil {
		tb.Fatal(err)
	}
	if err := w.pods.Add(pod); err != nil {
		tb.Fatal(err)
	}
}

// attempt runs what the scheduler runs for the waiting pod's failed cycle:
// WaitReason's PreFilter, then its classification.
func (w *world) attempt(tb testing.TB) waits.Verdict {
	tb.Helper()
	cs := framework.NewCycleState()
	if _, st := w.pl.PreFilter(tb.Context(), cs, w.pod, nil); !st.IsSuccess() {
		tb.Fatalf("PreFilter: %v", st)
	}
	v, err := w.pl.classify(tb.Context(), cs, w.pod, w.statuses)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
