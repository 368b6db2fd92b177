package schedule

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// webFailed: at 08:00 md-web goes from 1 to 2 replicas and md-batch stops.
const webFailed = `
apiVersion: rota.dev/v1alpha1
kind: DeploySchedule
metadata: {name: day, namespace: serving}
spec:
  timeZone: Asia/Ho_Chi_Minh
  mode: Enforce
  targets:
  - name: web
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-web}
    defaultState: Running
    defaultReplicas: 1
  - name: batch
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-batch}
    defaultState: Running
    defaultAllowDowntime: true
  windows:
  - name: business-hours
    recurring: {cron: "0 8 * * 1-5", duration: 10h}
    states:
    - {target: web, desiredState: Running, replicas: 2}
    - {target: batch, desiredState: Stopped, allowDowntime: true}
`

// A target whose last rollout failed (Deployment Progressing=False,
// ProgressDeadlineExceeded) is Ineligible{WorkloadFailed} when the
// schedule would start more of it, and the transition releases nothing:
// md-batch is not stopped for a md-web that cannot become ready (#40,
// eligibility: target failed).
func TestFailedWorkloadIsIneligible(t *testing.T) {
	e := newEnv(t, at(19, 7, 0), map[string]int{"gpu-node-0": 4})
	e.gpuDeployment("md-web", 1, 1)
	e.gpuDeployment("md-batch", 1, 1)
	e.waitReady("md-web", 1)
	e.waitReady("md-batch", 1)
	// A bad rollout of md-web: its new pods never become ready, and the
	// Deployment controller gives up after a second.
	d := e.deployment("md-web")
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](1)
	d.Spec.Template.Labels[neverReadyLabel] = "true"
	if _, err := e.cp.Client.AppsV1().Deployments(ns).Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !progressDeadlineExceeded(e.deployment("md-web")) {
		if time.Now().After(deadline) {
			t.Fatalf("md-web's rollout never failed: %+v", e.deployment("md-web").Status.Conditions)
		}
		e.tick(1)
		time.Sleep(200 * time.Millisecond)
	}
	obs := startObserver(t, e.cp.Client, ns)

	e.createSchedule(webFailed)
	e.startController(nil)
	e.convergedSince("day", at(19, 7, 0), 50)
	e.clock.SetTime(at(19, 8, 0))
	web := e.waitReason("day", "web", v1alpha1.TargetPhaseFailed, controller.ReasonIneligible, 50)
	expectTerminal(t, web, v1alpha1.TargetPhaseFailed, controller.ReasonIneligible,
		"Ineligible{WorkloadFailed}: Deployment md-web's last rollout failed (ProgressDeadlineExceeded: ",
		"fix the rollout (image, probes, resources) before the schedule starts more of it")
	batch := e.targetStatus("day", "batch")
	expectTerminal(t, batch, v1alpha1.TargetPhaseFailed, controller.ReasonTransitionAborted,
		"nothing was released: target web failed its preflight (Ineligible)")
	e.tick(12)
	e.expectUntouched(obs, "md-batch", "md-web")
	if r := e.replicas("md-batch"); r != 1 {
		t.Errorf("md-batch replicas %d, want 1: it was stopped for nothing", r)
	}
}

func progressDeadlineExceeded(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == v1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}
