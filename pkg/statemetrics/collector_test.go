package statemetrics

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func indexer(t *testing.T, objs ...runtime.Object) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// unstructuredOf is obj as a dynamic informer holds it.
func unstructuredOf(t *testing.T, obj any) runtime.Object {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func device(name, model, uuid string, taints ...resourceapi.DeviceTaint) resourceapi.Device {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": str(model), "uuid": str(uuid)}, Taints: taints}
}

func waitingPod(ns, name string, created time.Time, status v1.ConditionStatus, reason string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{
			Type: gpuv1.WaitingCondition, Status: status, Reason: reason,
		}}},
	}
}

// listers is a small cluster: one node with a free, an allocated, a
// reserved and an unhealthy H100, another driver's device, waiting and
// placed pods, a schedule with two targets and a degraded reservation.
func listers(t *testing.T) Listers {
	slices := []runtime.Object{
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpu"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: gpuv1.DriverName, NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1"},
			Devices: []resourceapi.Device{
				device("gpu-0", "H100", "GPU-0"),
				device("gpu-1", "H100", "GPU-1"),
				// The reservation's own taint does not make a GPU unhealthy.
				device("gpu-2", "H100", "GPU-2", resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: "team-a.serving", Effect: resourceapi.DeviceTaintEffectNoSchedule}),
				device("gpu-3", "H100", "GPU-3", resourceapi.DeviceTaint{Key: gpuv1.UnhealthyTaintKey, Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}),
			},
		}},
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-nic"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: "nic.example.com", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1"},
			Devices: []resourceapi.Device{device("nic-0", "X", "NIC-0")},
		}},
	}
	claims := []runtime.Object{&resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-gpu"},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Driver: gpuv1.DriverName, Pool: "n1", Device: "gpu-1", Request: "gpu",
			}}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "train"}},
		},
	}}
	t0 := time.Unix(1_800_000_000, 0)
	ended := waitingPod("ml", "done", t0.Add(-time.Hour), v1.ConditionTrue, "InsufficientCapacity")
	ended.Status.Phase = v1.PodSucceeded
	pods := []runtime.Object{
		waitingPod("ml", "a", t0, v1.ConditionTrue, "InsufficientCapacity"),
		waitingPod("ml", "b", t0.Add(-10*time.Minute), v1.ConditionTrue, "InsufficientCapacity"),
		waitingPod("team-a", "d", t0.Add(-5*time.Minute), v1.ConditionTrue, "ReservationOvercommitted"),
		waitingPod("ml", "placed", t0.Add(-2*time.Hour), v1.ConditionFalse, "Placed"),
		ended,
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "plain"}},
	}
	sched := &rotav1.DeploySchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shifts"},
		Status: rotav1.DeployScheduleStatus{Targets: []rotav1.TargetStatus{
			{Name: "a", Phase: rotav1.TargetPhase("Converged"), Reason: "Converged"},
			{Name: "b", Phase: rotav1.TargetPhase("Failed"), Reason: "StopTimeout"},
		}},
	}
	resv := &rotav1.GPUReservation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serving"},
		Status: rotav1.GPUReservationStatus{
			Devices: []rotav1.ReservedDevice{{UUID: "GPU-2"}},
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Held", LastTransitionTime: metav1.NewTime(t0)},
				{Type: "Degraded", Status: metav1.ConditionTrue, Reason: "DeviceUnavailable", LastTransitionTime: metav1.NewTime(t0)},
				{Type: "PlacementMismatch", Status: metav1.ConditionFalse, Reason: "MembersOnNode", LastTransitionTime: metav1.NewTime(t0)},
			},
		},
	}
	return Listers{
		Slices:       resourcelisters.NewResourceSliceLister(indexer(t, slices...)),
		Claims:       resourcelisters.NewResourceClaimLister(indexer(t, claims...)),
		Pods:         corelisters.NewPodLister(indexer(t, pods...)),
		Schedules:    cache.NewGenericLister(indexer(t, unstructuredOf(t, sched)), rotav1.DeploySchedulesResource.GroupResource()),
		Reservations: cache.NewGenericLister(indexer(t, unstructuredOf(t, resv)), rotav1.GPUReservationsResource.GroupResource()),
		Synced:       func() bool { return true },
	}
}

func TestCollector(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	reg.CustomMustRegister(New(listers(t)))
	want := `
# HELP rota_admission_waiting_pods [ALPHA] Pods whose rota.dev/Waiting condition is True, by namespace and wait reason code.
# TYPE rota_admission_waiting_pods gauge
rota_admission_waiting_pods{namespace="ml",reason="InsufficientCapacity"} 2
rota_admission_waiting_pods{namespace="team-a",reason="ReservationOvercommitted"} 1
# HELP rota_admission_waiting_since_timestamp_seconds [ALPHA] Creation time (Unix seconds) of the oldest pod waiting with this reason code in this namespace; time() minus it is how long that pod has waited.
# TYPE rota_admission_waiting_since_timestamp_seconds gauge
rota_admission_waiting_since_timestamp_seconds{namespace="ml",reason="InsufficientCapacity"} 1.7999994e+09
rota_admission_waiting_since_timestamp_seconds{namespace="team-a",reason="ReservationOvercommitted"} 1.7999997e+09
# HELP rota_pool_gpus [ALPHA] GPUs published by the driver's ResourceSlices, by node, model and state: unhealthy (a device taint other than a reservation's), reserved (held by a GPUReservation), allocated (allocated to a claim), free. Each GPU counts in exactly one state.
# TYPE rota_pool_gpus gauge
rota_pool_gpus{model="H100",node="n1",state="allocated"} 1
rota_pool_gpus{model="H100",node="n1",state="free"} 1
rota_pool_gpus{model="H100",node="n1",state="reserved"} 1
rota_pool_gpus{model="H100",node="n1",state="unhealthy"} 1
# HELP rota_reservation_status_condition [ALPHA] Conditions of a GPUReservation (Ready, Degraded, PlacementMismatch): 1 when True, 0 otherwise, with the condition's reason.
# TYPE rota_reservation_status_condition gauge
rota_reservation_status_condition{condition="Degraded",namespace="team-a",reason="DeviceUnavailable",reservation="serving"} 1
rota_reservation_status_condition{condition="PlacementMismatch",namespace="team-a",reason="MembersOnNode",reservation="serving"} 0
rota_reservation_status_condition{condition="Ready",namespace="team-a",reason="Held",reservation="serving"} 1
# HELP rota_schedule_target_status [ALPHA] One series per DeploySchedule target, value 1, labelled with the target's phase and reason (status.targets[]).
# TYPE rota_schedule_target_status gauge
rota_schedule_target_status{namespace="team-a",phase="Converged",reason="Converged",schedule="shifts",target="a"} 1
rota_schedule_target_status{namespace="team-a",phase="Failed",reason="StopTimeout",schedule="shifts",target="b"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestCollectorExportsNothingUnsynced: a replica whose caches have not
// synced (or that does not lead, so never starts them) exports no state,
// rather than an empty pool that would look like every driver gone.
func TestCollectorExportsNothingUnsynced(t *testing.T) {
	l := listers(t)
	l.Synced = func() bool { return false }
	reg := metrics.NewKubeRegistry()
	reg.CustomMustRegister(New(l))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if len(f.GetMetric()) > 0 {
			t.Errorf("unsynced collector exported %s", f.GetName())
		}
	}
}
