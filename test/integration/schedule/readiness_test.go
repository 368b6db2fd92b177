package schedule

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// llama70b's pods start but never become ready (as with a failing readiness
// probe). At 08:00 qwen32b is released and llama70b started; 3 minutes
// (spec.timeouts.readiness) after the start it fails with ReadinessTimeout.
// Its pods are kept, and qwen32b is not restarted.
func TestReadinessTimeout(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{llama: func(d *appsv1.Deployment) {
		d.Spec.Template.Labels = map[string]string{"app": d.Name, neverReadyLabel: "true"}
	}})
	ds := weekSchedule(t)
	ds.Spec.Timeouts = &v1alpha1.ScheduleTimeouts{Readiness: ptr.To(v1alpha1.Duration("3m"))}
	e.createScheduleObject(ds)
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)

	e.clock.SetTime(at(19, 8, 0))
	e.waitTarget(weekName, "llama70b", "acquiring with a running, unready pod", 100, func(st v1alpha1.TargetStatus) bool {
		if st.Phase != v1alpha1.TargetPhaseAcquiring {
			return false
		}
		for _, p := range e.pods("md-llama70b") {
			if p.Status.Phase == v1.PodRunning {
				return true
			}
		}
		return false
	})
	llama := e.waitReason(weekName, "llama70b", v1alpha1.TargetPhaseFailed, controller.ReasonReadinessTimeout, 100)
	expectTerminal(t, llama, v1alpha1.TargetPhaseFailed, controller.ReasonReadinessTimeout,
		"0 of 1 replicas ready 3m0s after the start",
		"Fix: Check the pods' readiness probes and container logs; the started pods are kept, not stopped.")
	if len(llama.Steps) != 1 || llama.Steps[0].SubmittedAt == nil || llama.Steps[0].CompletedAt == nil {
		t.Fatalf("llama70b steps: %s", describeSteps(llama.Steps))
	}
	if took := llama.Steps[0].CompletedAt.Sub(llama.Steps[0].SubmittedAt.Time); took < 3*time.Minute {
		t.Errorf("failed %s after the start, want no earlier than the 3m readiness timeout", took)
	}
	if st := e.targetStatus(weekName, "qwen32b"); st.Phase != v1alpha1.TargetPhaseConverged {
		t.Errorf("qwen32b: %s, want Converged (its release completed)", describe(st))
	}
	e.waitEvent(weekName, v1.EventTypeWarning, controller.ReasonReadinessTimeout, "target llama70b: Failed", "0 of 1 replicas ready")

	// Nothing is undone: the started pod stays, qwen32b stays stopped.
	e.tick(24)
	if r := e.replicas("md-llama70b"); r != 1 {
		t.Errorf("llama70b replicas %d, want 1 (started pods are kept)", r)
	}
	if pods := e.pods("md-llama70b"); len(pods) != 1 || pods[0].DeletionTimestamp != nil {
		t.Errorf("llama70b pods %d, want its one pod kept", len(pods))
	}
	if r := e.replicas("md-qwen32b"); r != 0 {
		t.Errorf("qwen32b restarted: replicas %d", r)
	}
	if n := obs.scaleChanges("md-llama70b"); n != 1 {
		t.Errorf("llama70b scale changed %d times, want once (the start)", n)
	}
	if st := e.targetStatus(weekName, "llama70b"); st.Reason != controller.ReasonReadinessTimeout {
		t.Errorf("llama70b two minutes later: %s", describe(st))
	}
}
