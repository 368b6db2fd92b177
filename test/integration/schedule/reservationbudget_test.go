package schedule

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
	"github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

// budgetSwap: at 08:00 md-small (a member declaring 20,000 MiB) stops and
// md-big (60,000 MiB per replica, bound to the reservation) starts, while
// md-other (80,000 MiB) keeps running on the same H200, whose budget is
// 136,582 MiB: 80,000 + 60,000 = 140,000 does not fit, whatever md-small
// frees.
const budgetSwap = `
apiVersion: rota.dev/v1alpha1
kind: DeploySchedule
metadata: {name: shared, namespace: serving}
spec:
  timeZone: Asia/Ho_Chi_Minh
  mode: Enforce
  targets:
  - name: small
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-small}
    defaultState: Running
    defaultReplicas: 1
    defaultAllowDowntime: true
  - name: big
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-big}
    reservationName: shared-h200
    defaultState: Stopped
    defaultAllowDowntime: true
  windows:
  - name: business-hours
    recurring: {cron: "0 8 * * 1-5", duration: 10h}
    states:
    - {target: small, desiredState: Stopped, allowDowntime: true}
    - {target: big, desiredState: Running, replicas: 1}
`

// A swap whose incoming Track H target cannot fit its time-sliced
// reservation's VRAM budget is refused in preflight, with the numbers,
// before the outgoing target is stopped (#40: "stopped for nothing").
func TestReservationBudgetRefusedReleasesNothing(t *testing.T) {
	const node = "h200-node"
	e := newEnv(t, at(19, 7, 0), map[string]int{})
	e.cp.Create(t, framework.Node(node), framework.H200Slice(node, 1))
	e.startReservationController()
	member := func(name, workload string) v1alpha1.ReservationMember {
		return v1alpha1.ReservationMember{Name: name, WorkloadRef: v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: workload}}
	}
	e.createReservation(&v1alpha1.GPUReservation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared-h200"},
		Spec: v1alpha1.GPUReservationSpec{NodeName: node, Count: ptr.To[int32](1), Mode: v1alpha1.ReservationTimeSliced, Headroom: "0.95",
			Members: []v1alpha1.ReservationMember{member("other", "md-other"), member("small", "md-small"), member("big", "md-big")}},
	})
	e.advance("GPUReservation shared-h200 Bound", 100, func() (bool, string) {
		r := e.reservation("shared-h200")
		return r.Status.Phase == v1alpha1.ReservationBound && r.Status.BudgetMiBPerGPU == 136582, fmt.Sprintf("%s %d", r.Status.Phase, r.Status.BudgetMiBPerGPU)
	})
	held := framework.UUIDSelector(e.reservation("shared-h200").Status.Devices[0].UUID)
	tol := []resourceapi.DeviceToleration{rsv.Toleration(ns, "shared-h200")}
	// md-other and md-small run on the held GPU through their own
	// templates; md-big's is pinned by its acquire step.
	shared := func(name string, memoryMiB int64, replicas int32, pinned bool) {
		var tmpl = framework.SharedGPUTemplate(ns, name+"-shared", memoryMiB, nil)
		if !pinned {
			tmpl = framework.SharedGPUTemplate(ns, name+"-shared", memoryMiB, tol, held)
		}
		if _, err := e.cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(e.ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.gpuDeploymentWith(name, replicas, 1, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To(tmpl.Name)
		})
	}
	shared("md-other", 80000, 1, false)
	shared("md-small", 20000, 1, false)
	shared("md-big", 60000, 0, true)
	e.waitReady("md-other", 1)
	e.waitReady("md-small", 1)
	e.advance("members other and small counted", 100, func() (bool, string) {
		r := e.reservation("shared-h200")
		mem := map[string]int64{}
		for _, m := range r.Status.Members {
			mem[m.Name] = m.MemoryMiB
		}
		return mem["other"] == 80000 && mem["small"] == 20000, fmt.Sprint(mem)
	})
	obs := startObserver(t, e.cp.Client, ns)

	e.createSchedule(budgetSwap)
	e.startController(nil)
	e.convergedSince("shared", at(19, 7, 0), 50)
	e.clock.SetTime(at(19, 8, 0))
	big := e.waitReason("shared", "big", v1alpha1.TargetPhaseFailed, controller.ReasonReservationBudgetRefused, 50)
	expectTerminal(t, big, v1alpha1.TargetPhaseFailed, controller.ReasonReservationBudgetRefused,
		"GPUReservation shared-h200 holds 1 healthy GPU(s) with a budget of 136582 MiB each (136582 MiB); "+
			"the members that stay declare 80000 MiB and big needs 1 replica(s) × 60000 MiB = 60000 MiB: 140000 > 136582; nothing was released",
		"Fix: Lower the incoming target's replicas")
	small := e.targetStatus("shared", "small")
	expectTerminal(t, small, v1alpha1.TargetPhaseFailed, controller.ReasonTransitionAborted,
		"nothing was released: target big failed its preflight (ReservationBudgetRefused)")
	e.tick(12)
	e.expectUntouched(obs, "md-small", "md-big", "md-other")
	if r := e.replicas("md-small"); r != 1 {
		t.Errorf("md-small replicas %d, want 1: it was stopped for nothing", r)
	}
}
