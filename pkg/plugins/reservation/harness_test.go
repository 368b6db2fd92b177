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
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// claimMap is the DRA claim tracker of these tests.
type claimMap map[string]*resourceapi.ResourceClaim

func (m claimMap) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := m[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

// world is the cluster state a test plugin sees.
type world struct {
	reservations []*rotav1.GPUReservation
	replicaSets  []*appsv1.ReplicaSet
	claims       claimMap
}

func (w world) plugin(t *testing.T) *Reservation {
	t.Helper()
	resIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, r := range w.reservations {
		u, err := rsv.ToUnstructured(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := resIdx.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	rsIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, rs := range w.replicaSets {
		if err := rsIdx.Add(rs); err != nil {
			t.Fatal(err)
		}
	}
	return &Reservation{
		claims:       w.claims,
		replicaSets:  appslisters.NewReplicaSetLister(rsIdx),
		reservations: cache.NewGenericLister(resIdx, rotav1.GPUReservationsResource.GroupResource()),
		synced:       func() bool { return true },
		metrics:      newMetrics(),
		inFlight:     newLedger(),
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

func replicaSet(ns, deployment string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: deployment + "-rs", UID: types.UID(deployment + "-rs-uid"),
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: deployment, Controller: ptr.To(true)}},
	}}
}

// claim is ns/name with one request tolerating tolerate (TaintValue, "" for
// none) and a GpuConfig with memoryMiB (0 for none).
func claim(ns, name, tolerate string, memoryMiB int64) *resourceapi.ResourceClaim {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.rota.dev"}
	if tolerate != "" {
		req.Tolerations = []resourceapi.DeviceToleration{{Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual, Value: tolerate, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	}
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
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
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	}
	return p
}

func addClaims(m claimMap, claims ...*resourceapi.ResourceClaim) claimMap {
	for _, c := range claims {
		m[fmt.Sprintf("%s/%s", c.Namespace, c.Name)] = c
	}
	return m
}
