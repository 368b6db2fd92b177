package quotastatus

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// slice is node's slice of n GPUs of model; the GPUs in unhealthy carry
// the driver's unhealthy taint with NoSchedule, those in warned with None.
func slice(node, model string, n int, unhealthy, warned map[int]bool) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec:       resourceapi.ResourceSliceSpec{Driver: gpuv1.DriverName, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	for i := range n {
		d := resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			gpuv1.AttributeModel: {StringValue: ptr.To(model)},
		}}
		switch {
		case unhealthy[i]:
			d.Taints = []resourceapi.DeviceTaint{{Key: gpuv1.UnhealthyTaintKey, Value: "xid", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		case warned[i]:
			d.Taints = []resourceapi.DeviceTaint{{Key: gpuv1.UnhealthyTaintKey, Value: "ecc", Effect: resourceapi.DeviceTaintEffectNone}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

// claim is an allocated claim of namespace holding the devices of node.
func claim(namespace, name, node string, devices ...int) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: gpuv1.DriverName, Pool: node, Device: fmt.Sprintf("gpu-%d", d),
		})
	}
	return c
}

// TestPoolOf: healthy GPUs per model leave out the unhealthy ones (not the
// ones only warned about) and other drivers' devices; each tenant uses
// each GPU once (time-sliced between two of its claims or not); a
// reservation's healthy GPUs count for its namespace.
func TestPoolOf(t *testing.T) {
	other := slice("n9", "FPGA", 2, nil, nil)
	other.Spec.Driver = "fpga.example.com"
	slices := []*resourceapi.ResourceSlice{
		slice("n1", "H100", 8, map[int]bool{7: true}, map[int]bool{6: true}),
		slice("n2", "H200", 4, nil, nil),
		other,
	}
	claims := []*resourceapi.ResourceClaim{
		claim("team-a", "train", "n1", 0, 1, 2),
		claim("team-a", "shared-1", "n2", 0),
		claim("team-a", "shared-2", "n2", 0),
		claim("team-b", "serve", "n1", 3),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "pending"}},
	}
	reservations := []*rotav1.GPUReservation{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "r"},
		Status: rotav1.GPUReservationStatus{Devices: []rotav1.ReservedDevice{
			{Model: "H100", Device: "gpu-4", Healthy: true}, {Model: "H100", Device: "gpu-5", Healthy: true}, {Model: "H100", Device: "gpu-7", Healthy: false},
		}},
	}}
	want := gpuquota.Pool{
		Healthy:  map[string]int{"H100": 7, "H200": 4},
		Used:     map[string]map[string]int{"team-a": {"H100": 3, "H200": 1}, "team-b": {"H100": 1}},
		Reserved: map[string]map[string]int{"team-b": {"H100": 2}},
	}
	if diff := cmp.Diff(want, PoolOf(slices, claims, reservations)); diff != "" {
		t.Errorf("PoolOf (-want +got):\n%s", diff)
	}
}

func quota(name string, gen int64, models ...rotav1.ModelQuota) *rotav1.GPUQuota {
	return &rotav1.GPUQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}, Spec: rotav1.GPUQuotaSpec{Models: models}}
}

// TestComputeStatus: the scenario. Two tenants guaranteed 8 H100
// each on 16 healthy H100 fit; B using 16 borrows 8 that A lends; a
// guarantee raised past the pool turns the condition False with the
// numbers, keeping the models' numbers.
func TestComputeStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	a := quota("team-a", 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 8})
	b := quota("team-b", 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 8})
	status := func(p gpuquota.Pool, q *rotav1.GPUQuota, now metav1.Time, qs ...*rotav1.GPUQuota) rotav1.GPUQuotaStatus {
		table, _ := gpuquota.NewTable(qs, nil)
		return ComputeStatus(q, Reports(gpuquota.Account(table, p)), gpuquota.Validate(q), now)
	}
	pool := gpuquota.Pool{Healthy: map[string]int{"H100": 16}}

	st := status(pool, a, t0, a, b)
	cond := meta.FindStatusCondition(st.Conditions, rotav1.ConditionGuaranteesFit)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != rotav1.ReasonGuaranteesFit ||
		cond.Message != "H100: guarantees 16 (team-a 8, team-b 8) fit the 16 healthy GPUs" || st.ObservedGeneration != 1 {
		t.Errorf("fits: got %+v", st)
	}

	pool.Used = map[string]map[string]int{"team-b": {"H100": 16}}
	a.Status = st
	stA, stB := status(pool, a, t1, a, b), status(pool, b, t1, a, b)
	if diff := cmp.Diff([]rotav1.ModelQuotaStatus{{Model: "H100", Guaranteed: 8, Lent: 8}}, stA.Models); diff != "" {
		t.Errorf("lender (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]rotav1.ModelQuotaStatus{{Model: "H100", Guaranteed: 8, Used: 16, Borrowed: 8}}, stB.Models); diff != "" {
		t.Errorf("borrower (-want +got):\n%s", diff)
	}
	if got := meta.FindStatusCondition(stA.Conditions, rotav1.ConditionGuaranteesFit).LastTransitionTime; !got.Equal(&t0) {
		t.Errorf("the condition kept its status but moved its transition time to %v", got)
	}

	a2 := quota("team-a", 2, rotav1.ModelQuota{Model: "H100", Guaranteed: 12})
	a2.Status = stA
	st = status(pool, a2, t1, a2, b)
	cond = meta.FindStatusCondition(st.Conditions, rotav1.ConditionGuaranteesFit)
	want := metav1.Condition{Type: rotav1.ConditionGuaranteesFit, Status: metav1.ConditionFalse, Reason: rotav1.ReasonGuaranteesExceedPool,
		Message: "H100: guarantees 20 (team-a 12, team-b 8) exceed the 16 healthy GPUs by 4", ObservedGeneration: 2, LastTransitionTime: t1}
	if diff := cmp.Diff(want, *cond); diff != "" {
		t.Errorf("exceeds (-want +got):\n%s", diff)
	}
	if st.ObservedGeneration != 2 || len(st.Models) != 1 || st.Models[0].Guaranteed != 12 {
		t.Errorf("exceeds: got %+v", st)
	}
}

// TestComputeStatusMessageJoinsModels: a GPUQuota of two models explains
// both; one that does not fit makes the condition False.
func TestComputeStatusMessageJoinsModels(t *testing.T) {
	q := quota("team-a", 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 2}, rotav1.ModelQuota{Model: "H200", Guaranteed: 4})
	table, _ := gpuquota.NewTable([]*rotav1.GPUQuota{q}, nil)
	p := gpuquota.Pool{Healthy: map[string]int{"H100": 8, "H200": 2}}
	st := ComputeStatus(q, Reports(gpuquota.Account(table, p)), nil, metav1.Now())
	cond := meta.FindStatusCondition(st.Conditions, rotav1.ConditionGuaranteesFit)
	wantMsg := "H100: guarantees 2 (team-a 2) fit the 8 healthy GPUs; H200: guarantees 4 (team-a 4) exceed the 2 healthy GPUs by 2"
	if cond.Status != metav1.ConditionFalse || cond.Message != wantMsg {
		t.Errorf("got %s %q, want False %q", cond.Status, cond.Message, wantMsg)
	}
}

// TestComputeStatusInvalid: a GPUQuota that fails validation gets no
// numbers and an Unknown condition naming the field.
func TestComputeStatusInvalid(t *testing.T) {
	q := quota("team-a", 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 2, LendingLimit: ptr.To[int32](3)})
	st := ComputeStatus(q, nil, gpuquota.Validate(q), metav1.Now())
	cond := meta.FindStatusCondition(st.Conditions, rotav1.ConditionGuaranteesFit)
	if len(st.Models) != 0 || cond.Status != metav1.ConditionUnknown || cond.Reason != ReasonInvalidSpec {
		t.Fatalf("got %+v", st)
	}
	if want := "spec.models[0].lendingLimit"; !strings.Contains(cond.Message, want) {
		t.Errorf("message %q does not name %s", cond.Message, want)
	}
}
