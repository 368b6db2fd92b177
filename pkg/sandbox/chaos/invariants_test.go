package chaos

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/sim/kubelet"
)

func allocated(name, device string, share bool, memMiB int64) resourceapi.ResourceClaim {
	res := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuv1.DriverName, Pool: "h200-0", Device: device}
	if share {
		res.ShareID = ptr.To(types.UID("share-" + name))
	}
	if memMiB > 0 {
		res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": *resource.NewQuantity(memMiB<<20, resource.BinarySI)}
	}
	return resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{res}},
		}},
	}
}

func TestDoubleBookedSeesOnlyExclusiveSharing(t *testing.T) {
	shared := []resourceapi.ResourceClaim{allocated("a", "gpu-0", true, 0), allocated("b", "gpu-0", true, 0), allocated("c", "gpu-1", false, 0)}
	if got := doubleBooked(shared); len(got) != 0 {
		t.Errorf("shares of one GPU and an exclusive claim elsewhere reported as double-booked: %v", got)
	}
	clash := append(shared, allocated("d", "gpu-1", false, 0))
	if got := doubleBooked(clash); len(got) != 1 || !strings.Contains(got[0], "h200-0/gpu-1") {
		t.Errorf("two exclusive claims on gpu-1: got %v", got)
	}
	mixed := append(shared, allocated("e", "gpu-0", false, 0))
	if got := doubleBooked(mixed); len(got) != 1 {
		t.Errorf("an exclusive claim beside shares of gpu-0: got %v", got)
	}
}

func TestDisagreementBetweenCheckpointAndKubelet(t *testing.T) {
	cp := checkpoint.New("boot-1")
	cp.Claims["u1"] = checkpoint.Claim{UID: "u1", Namespace: "ml", Name: "one", State: checkpoint.PrepareCompleted}
	cp.Claims["u2"] = checkpoint.Claim{UID: "u2", Namespace: "ml", Name: "two", State: checkpoint.PrepareStarted}
	agree := []kubelet.ClaimRecord{{UID: "u1", Prepared: true}, {UID: "u2"}, {UID: "u3"}}
	if d := disagreement(cp, agree); d != "" {
		t.Errorf("agreeing records: %s", d)
	}
	if d := disagreement(cp, agree[:1]); !strings.Contains(d, "never asked for") {
		t.Errorf("a claim in the checkpoint the kubelet does not know: %q", d)
	}
	lost := append(agree, kubelet.ClaimRecord{UID: "u4", Namespace: "ml", Name: "four", Prepared: true})
	if d := disagreement(cp, lost); !strings.Contains(d, "ml/four") {
		t.Errorf("a prepare the driver answered and the checkpoint lost: %q", d)
	}
}

func TestOverBudget(t *testing.T) {
	res := &rotav1.GPUReservation{Status: rotav1.GPUReservationStatus{BudgetMiBPerGPU: 136582,
		Devices: []rotav1.ReservedDevice{{Pool: "h200-0", Device: "gpu-0"}}}}
	holder := allocated("holder", "gpu-0", true, 143771)
	holder.Labels = map[string]string{gpuv1.ReservationNameLabel: "serving"}
	within := []resourceapi.ResourceClaim{holder, allocated("b", "gpu-0", true, 4096), allocated("c", "gpu-0", true, 61440), allocated("x", "gpu-1", true, 143771)}
	if got := overBudget(res, within); len(got) != 0 {
		t.Errorf("B and C within the budget: %v", got)
	}
	if got := overBudget(res, append(within, allocated("d", "gpu-0", true, 75776))); len(got) != 1 || !strings.Contains(got[0], "141312 MiB of a 136582 MiB budget") {
		t.Errorf("D beside B and C: %v", got)
	}
}

func TestTransitionKeyAppliedTwice(t *testing.T) {
	ta := newTally()
	tr := newTransitions(ta)
	d := func(key string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: reservationNamespace, Name: "md-a",
			Annotations: map[string]string{gpuv1.TransitionKeyAnnotation: key}}}
	}
	for _, k := range []string{"k1", "k1", "k2", "k2"} {
		tr.observe(d(k))
	}
	if _, v := ta.snapshot(); len(v) != 0 {
		t.Fatalf("each key once: %v", v)
	}
	tr.observe(d("k1"))
	if _, v := ta.snapshot(); len(v) != 1 || v[0].Invariant != InvTransitionOnce {
		t.Errorf("k1 again after k2: %v", v)
	}
	if m, _ := tr.counts(); m != 2 {
		t.Errorf("%d mutations counted, want 2", m)
	}
}

func TestBoundaryJudgedOnce(t *testing.T) {
	ta := newTally()
	tr := newTransitions(ta)
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	ds := &rotav1.DeploySchedule{Status: rotav1.DeployScheduleStatus{Targets: []rotav1.TargetStatus{
		{Name: "a", Phase: rotav1.TargetPhaseConverged, Desired: &rotav1.TargetIntent{IntervalStart: &metav1.Time{Time: at}}},
		{Name: "b", Phase: rotav1.TargetPhaseReleasing, Desired: &rotav1.TargetIntent{IntervalStart: &metav1.Time{Time: at}}},
	}}}
	tr.observeSchedule(ds)
	tr.judge(at, scheduleTargets)
	tr.judge(at, scheduleTargets)
	checks, v := ta.snapshot()
	if len(v) != 1 || !strings.Contains(v[0].Detail, "target b") {
		t.Errorf("b never terminal: %v", v)
	}
	if checks[InvBoundaryTerminal] != 2 {
		t.Errorf("%d checks, want 2 (one boundary, two targets, judged once)", checks[InvBoundaryTerminal])
	}
}

func TestParseNodes(t *testing.T) {
	nodes, err := ParseNodes("h100-0=dgx-h100,h200-0=hgx-h200+cm")
	if err != nil || len(nodes) != 2 || nodes[1].Name != "h200-0" || !nodes[1].ConsumableMemory || nodes[0].ConsumableMemory {
		t.Errorf("ParseNodes = %+v, %v", nodes, err)
	}
	for _, bad := range []string{"dgx-h100", "a=nope", "a=dgx-h100,a=dgx-a100"} {
		if _, err := ParseNodes(bad); err == nil {
			t.Errorf("ParseNodes(%q) accepted", bad)
		}
	}
}
