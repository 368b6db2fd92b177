package reservation

import (
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/plugins/refusalmemo"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// claimMap is the DRA claim tracker of these tests: claims by
// namespace/name, and allocations made in Reserve but not written yet.
type claimMap map[string]*resourceapi.ResourceClaim

// pendingAllocations are the allocations of claimMap's claims that are
// pending (keyed by claim UID); tests set them through the world.
type pendingAllocations map[types.UID]*resourceapi.AllocationResult

type tracker struct {
	claims  claimMap
	pending pendingAllocations
}

func (m tracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := m.claims[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

func (m tracker) List() ([]*resourceapi.ResourceClaim, error) {
	out := make([]*resourceapi.ResourceClaim, 0, len(m.claims))
	for _, c := range m.claims {
		out = append(out, c)
	}
	return out, nil
}

func (m tracker) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return m.pending[uid]
}

// world is the cluster state a test plugin sees.
type world struct {
	reservations []*rotav1.GPUReservation
	deployments  []string // of namespace team-a and team-b, each with its ReplicaSet
	claims       claimMap
	pending      pendingAllocations
}

func (w world) plugin(t testing.TB) *Reservation {
	t.Helper()
	// The stores as the plugin's informers fill them: reservations come
	// through the transform, claims are indexed as they are at the start
	// (the tracker, which tests change, gives their current state).
	resIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, reservationIndexers())
	for _, r := range w.reservations {
		u, err := rsv.ToUnstructured(r)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := toTypedReservation(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := resIdx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	claimIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, claimIndexers())
	for _, c := range w.claims {
		if err := claimIdx.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	rsIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	depIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, ns := range []string{"team-a", "team-b"} {
		for _, d := range w.deployments {
			if err := rsIdx.Add(replicaSet(ns, d)); err != nil {
				t.Fatal(err)
			}
			if err := depIdx.Add(&appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d, UID: types.UID(ns + "-" + d + "-uid")},
				Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d}}},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	empty := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) }
	if w.pending == nil {
		w.pending = pendingAllocations{}
	}
	return &Reservation{
		claims:     tracker{claims: w.claims, pending: w.pending},
		claimIndex: claimIdx,
		owners: &rsv.Owners{
			ReplicaSets:  appslisters.NewReplicaSetLister(rsIdx),
			Deployments:  appslisters.NewDeploymentLister(depIdx),
			StatefulSets: appslisters.NewStatefulSetLister(empty()),
			Jobs:         batchlisters.NewJobLister(empty()),
			Pods:         corelisters.NewPodLister(empty()),
		},
		reservations: resIdx,
		synced:       func() bool { return true },
		metrics:      newMetrics(),
		refused:      refusalmemo.New(nil),
	}
}

// boundReservation is a time-sliced reservation of ns holding one H200 on
// n1 with the budget of 143771 MiB × 0.95, listing Deployments as members.
func boundReservation(ns, name string, mode rotav1.ReservationMode, deployments ...string) *rotav1.GPUReservation {
	r := &rotav1.GPUReservation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       rotav1.GPUReservationSpec{NodeName: "n1", Count: ptr.To[int32](1), Mode: mode},
		Status: rotav1.GPUReservationStatus{
			Phase: rotav1.ReservationBound, GPUCount: 1, BudgetMiBPerGPU: 136582,
			Devices: []rotav1.ReservedDevice{{UUID: "GPU-0", Pool: "n1", Device: "gpu-0", MemoryMiB: 143771, Healthy: true}},
		},
	}
	for _, d := range deployments {
		r.Spec.Members = append(r.Spec.Members, rotav1.ReservationMember{Name: d, WorkloadRef: rotav1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d}})
	}
	return r
}

// replicaSet is the ReplicaSet of Deployment ns/deployment, as the
// deployment controller makes it.
func replicaSet(ns, deployment string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": deployment}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: deployment + "-rs", UID: types.UID(ns + "-" + deployment + "-rs-uid"), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment, UID: types.UID(ns + "-" + deployment + "-uid"), Controller: ptr.To(true)}},
		},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
}

// claim is ns/name with one request tolerating tolerate (TaintValue, "" for
// none) and a GpuConfig with memoryMiB (0 for none).
func claim(ns, name, tolerate string, memoryMiB int64) *resourceapi.ResourceClaim {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.rota.dev"}
	if tolerate != "" {
		req.Tolerations = []resourceapi.DeviceToleration{{Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual, Value: tolerate, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	}
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}},
	}
	if memoryMiB > 0 {
		raw, _ := json.Marshal(map[string]any{"apiVersion": "gpu.rota.dev/v1alpha1", "kind": "GpuConfig", "sharing": map[string]any{"strategy": "TimeSlicing"}, "memoryMiB": memoryMiB})
		c.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "gpu.rota.dev", Parameters: runtime.RawExtension{Raw: raw}},
		}}}
	}
	return c
}

// pod is ns/name using claim claimName, owned by the ReplicaSet of
// deployment ("" for a bare pod), bound to node ("" for pending).
func pod(ns, name, deployment, claimName, node string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec: v1.PodSpec{
			NodeName:       node,
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claimName)}},
		},
	}
	if deployment != "" {
		rs := replicaSet(ns, deployment)
		p.Labels = rs.Spec.Selector.MatchLabels
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	}
	return p
}

func addClaims(m claimMap, claims ...*resourceapi.ResourceClaim) claimMap {
	for _, c := range claims {
		m[fmt.Sprintf("%s/%s", c.Namespace, c.Name)] = c
	}
	return m
}

// allocation is what the allocator gives claim: one result per device (on
// node n1) for its first request, with the claim's configs.
func allocation(c *resourceapi.ResourceClaim, devices ...string) *resourceapi.AllocationResult {
	a := &resourceapi.AllocationResult{}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: c.Spec.Devices.Requests[0].Name, Driver: "gpu.rota.dev", Pool: "n1", Device: d,
		})
	}
	for _, cfg := range c.Spec.Devices.Config {
		a.Devices.Config = append(a.Devices.Config, resourceapi.DeviceAllocationConfiguration{
			Source: resourceapi.AllocationConfigSourceClaim, Requests: cfg.Requests, DeviceConfiguration: cfg.DeviceConfiguration,
		})
	}
	return a
}

// allocated returns claim with its allocation on devices written.
func allocated(c *resourceapi.ResourceClaim, devices ...string) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.Status.Allocation = allocation(c, devices...)
	return c
}

// withCount makes claim's request ask for n devices.
func withCount(c *resourceapi.ResourceClaim, n int64) *resourceapi.ResourceClaim {
	c.Spec.Devices.Requests[0].Exactly.Count = n
	return c
}

// heldGPUs makes r hold n H200s of n1 (gpu-0 …).
func heldGPUs(r *rotav1.GPUReservation, n int) *rotav1.GPUReservation {
	r.Status.Devices = nil
	for i := range n {
		r.Status.Devices = append(r.Status.Devices, rotav1.ReservedDevice{UUID: fmt.Sprintf("GPU-%d", i), Pool: "n1", Device: fmt.Sprintf("gpu-%d", i), MemoryMiB: 143771, Healthy: true})
	}
	r.Status.GPUCount = int32(n)
	return r
}
