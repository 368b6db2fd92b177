package reservation

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	reservationcontroller "github.com/rota-dev/rota/pkg/reservation/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestScenarioH200Reservation is the H200 reservation scenario (docs/design.md#scenario-h200-reservation): a reservation holding one H200 of
// an 8× H200 node, time-sliced, with members whose VRAM budgets fit; a
// fourth that would pass the budget is refused with numbers; non-members
// never land on the reserved GPU, also while every member is stopped; an
// unhealthy reserved GPU degrades the reservation.
func TestScenarioH200Reservation(t *testing.T) {
	cp := setup(t)
	ctx := context.Background()

	createReservation(t, cp, timeSliced(tenant, "serving", 1,
		member("a", "md-a"), member("b", "md-b"), member("c", "md-c"), member("d", "md-d")))
	res := waitForReservation(t, cp, tenant, "serving", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound
	})
	if got, want := res.Status.BudgetMiBPerGPU, int64(136582); got != want {
		t.Errorf("budget per GPU = %d MiB, want %d (143771 MiB × 0.95, floored)", got, want)
	}
	if len(res.Status.Devices) != 1 || res.Status.Devices[0].Device != "gpu-0" {
		t.Fatalf("held devices = %+v, want gpu-0 (lowest free index)", res.Status.Devices)
	}
	uuid := res.Status.Devices[0].UUID
	t.Logf("reservation holds %s (%s), budget %d MiB", res.Status.Devices[0].Device, uuid, res.Status.BudgetMiBPerGPU)

	// Members' templates pin the held UUID and tolerate the reservation.
	budgets := map[string]int64{"a": 40960, "b": 61440, "c": 30720, "d": 8192}
	rs := map[string]*appsv1.ReplicaSet{}
	for _, m := range []string{"a", "b", "c", "d"} {
		rs[m] = cp.CreateDeployment(t, tenant, "md-"+m)
		cp.Create(t, framework.SharedGPUTemplate(tenant, "tmpl-"+m, budgets[m], reservedToleration(tenant, "serving"), framework.UUIDSelector(uuid)))
	}
	startMember := func(m, pod string) *v1.Pod {
		p := framework.ReplicaPod(rs[m], pod, schedulerName, "tmpl-"+m)
		cp.Create(t, p)
		return p
	}
	// A, B and C: 40960 + 61440 + 30720 = 133120 MiB ≤ 136582.
	for _, m := range []string{"a", "b", "c"} {
		p := startMember(m, m+"-0")
		cp.WaitForPodBound(t, tenant, p.Name)
		if got := allocatedDevices(t, cp, p); len(got) != 1 || got[0] != "gpu-0" {
			t.Errorf("member %s allocated %v, want [gpu-0]", m, got)
		}
	}
	// D would make 141312 MiB: below the GPU's 143771, above the budget.
	d := startMember("d", "d-0")
	msg := cp.WaitForPodUnschedulable(t, tenant, d.Name, "ReservationOvercommitted", "133120 MiB", "asks 8192 MiB", "141312 > 136582")
	t.Logf("4th member refused: %s", msg)

	// Non-members. Same namespace, a label copied from a member and the
	// reservation's toleration: refused as not a member.
	forged := framework.GPUPod(tenant, "forged", schedulerName, "tmpl-a")
	forged.Labels = map[string]string{"app": "md-a", "rota.dev/member": "a"}
	cp.Create(t, forged)
	msg = cp.WaitForPodUnschedulable(t, tenant, forged.Name, "ReservationNotMember", "not a member of GPUReservation team-a/serving")
	t.Logf("forged label refused: %s", msg)
	// Other namespace, claiming the reservation's toleration.
	cp.Create(t, framework.SharedGPUTemplate(outsiders, "steal", 4096, reservedToleration(tenant, "serving"), framework.UUIDSelector(uuid)))
	thief := framework.GPUPod(outsiders, "thief", schedulerName, "steal")
	cp.Create(t, thief)
	cp.WaitForPodUnschedulable(t, outsiders, thief.Name, "ReservationNotMember", "not a reservation of namespace team-b")
	// Other namespace, pinned to the reserved UUID without toleration: the
	// allocator itself refuses the tainted GPU, idle capacity or not.
	cp.Create(t, framework.SharedGPUTemplate(outsiders, "pinned", 1024, nil, framework.UUIDSelector(uuid)))
	pinned := framework.GPUPod(outsiders, "pinned", schedulerName, "pinned")
	cp.Create(t, pinned)
	framework.WaitFor(t, "pinned outsider to be refused", func(ctx context.Context) (bool, string, error) {
		return podScheduledFalse(ctx, cp, outsiders, pinned.Name)
	})
	// An ordinary pod in the reservation's namespace lands on another GPU.
	cp.Create(t, framework.SharedGPUTemplate(tenant, "plain", 1024, nil))
	plain := framework.GPUPod(tenant, "plain", schedulerName, "plain")
	cp.Create(t, plain)
	cp.WaitForPodBound(t, tenant, plain.Name)
	if got := allocatedDevices(t, cp, plain); len(got) != 1 || got[0] == "gpu-0" {
		t.Errorf("non-member allocated %v, want one GPU other than the reserved gpu-0", got)
	}

	// Witness: the status lists each running member with its memoryMiB,
	// converged on the held GPU.
	res = waitForReservation(t, cp, tenant, "serving", "members a, b, c converged", func(r *rotav1.GPUReservation) bool {
		n := 0
		for _, m := range r.Status.Members {
			if m.Pods == 1 && m.MemoryMiB == budgets[m.Name] && m.Placement == reservationcontroller.PlacementConverged {
				n++
			}
		}
		return n == 3
	})
	if c := condition(res, reservationcontroller.ConditionPlacementMismatch); c.Status != metav1.ConditionFalse {
		t.Errorf("PlacementMismatch = %+v, want False", c)
	}

	// Holder: stop every member (D first, so that the freed budget does not
	// admit it), then an outsider submitted in the gap still does not get
	// the GPU; restarted members do.
	cp.Client.CoreV1().Pods(tenant).Delete(ctx, d.Name, metav1.DeleteOptions{}) //nolint:errcheck // checked by the wait below
	for _, m := range []string{"a", "b", "c"} {
		cp.DeletePodNow(t, tenant, m+"-0")
	}
	gap := framework.GPUPod(outsiders, "gap", schedulerName, "pinned")
	cp.Create(t, gap)
	framework.WaitFor(t, "outsider submitted while members are stopped to be refused", func(ctx context.Context) (bool, string, error) {
		return podScheduledFalse(ctx, cp, outsiders, gap.Name)
	})
	waitForReservation(t, cp, tenant, "serving", "still Bound with no member running", func(r *rotav1.GPUReservation) bool {
		for _, m := range r.Status.Members {
			if m.Pods != 0 {
				return false
			}
		}
		return r.Status.Phase == rotav1.ReservationBound && len(r.Status.Devices) == 1 && r.Status.Devices[0].UUID == uuid
	})
	for _, m := range []string{"a", "b", "c"} {
		p := startMember(m, m+"-1")
		cp.WaitForPodBound(t, tenant, p.Name)
		if got := allocatedDevices(t, cp, p); len(got) != 1 || got[0] != "gpu-0" {
			t.Errorf("restarted member %s allocated %v, want [gpu-0]", m, got)
		}
	}
	for _, p := range []*v1.Pod{gap, pinned, thief, forged} {
		if bound, msg, err := podScheduledFalse(ctx, cp, p.Namespace, p.Name); err != nil || !bound {
			t.Errorf("non-member %s/%s: %v %s", p.Namespace, p.Name, err, msg)
		}
	}

	// The reserved GPU turns unhealthy: Degraded, with the device named.
	cp.SetDeviceTaints(t, node, "gpu-0", framework.UnhealthyTaint)
	res = waitForReservation(t, cp, tenant, "serving", "Degraded", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationDegraded
	})
	if c := condition(res, reservationcontroller.ConditionDegraded); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "gpu-0") {
		t.Errorf("Degraded condition = %+v, want True naming gpu-0", c)
	}
	cp.SetDeviceTaints(t, node, "gpu-0")
	waitForReservation(t, cp, tenant, "serving", "Bound again after the GPU healed", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound
	})
	t.Log(describeReservation(res))

	// Many syncs later the controller has written its rule once: what the
	// API server fills in (the taint's TimeAdded) is not fought over.
	rules, err := cp.Client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: gpuv1.ReservationNameLabel + "=serving"})
	if err != nil || len(rules.Items) != 1 {
		t.Fatalf("rules of the reservation: %v (%v), want one", rules, err)
	}
	if g := rules.Items[0].Generation; g != 1 {
		t.Errorf("DeviceTaintRule %s has generation %d, want 1 (rewritten by the controller)", rules.Items[0].Name, g)
	}
}
