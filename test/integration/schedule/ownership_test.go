package schedule

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// otherTeam names md-qwen32b, which the week schedule already drives, and
// wants it stopped now. Its name sorts after the week schedule's, so the
// week schedule owns the workload even when both were created in the same
// second (creation timestamps have whole seconds).
const otherTeam = `apiVersion: rota.dev/v1alpha1
kind: DeploySchedule
metadata: {name: other-team, namespace: serving}
spec:
  timeZone: Asia/Ho_Chi_Minh
  targets:
  - name: batch
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-qwen32b}
    defaultState: Stopped
    defaultAllowDowntime: true
`

// A second schedule naming a workload the first one drives is refused with
// TargetOwned and never touches it; the first keeps driving it.
func TestTargetOwnedBySecondSchedule(t *testing.T) {
	e, obs := nightPool(t, at(19, 7, 0))
	e.createSchedule(otherTeam)
	e.startController(nil)
	batch := e.waitReason("other-team", "batch", v1alpha1.TargetPhaseFailed, controller.ReasonTargetOwned, 50)
	expectTerminal(t, batch, v1alpha1.TargetPhaseFailed, controller.ReasonTargetOwned,
		"Deployment md-qwen32b is already driven by DeploySchedule "+weekName+" (created first); this schedule leaves it alone",
		"Fix: Remove the target from one of the two schedules; the schedule created first keeps the workload.")
	e.waitEvent("other-team", v1.EventTypeWarning, controller.ReasonTargetOwned, "target batch: Failed")
	e.convergedSince(weekName, at(19, 7, 0), 50)
	e.tick(12)
	e.expectUntouched(obs, "md-qwen32b")
	if r := e.replicas("md-qwen32b"); r != 1 {
		t.Errorf("qwen32b replicas %d, want 1", r)
	}

	// The first schedule keeps the workload: its 08:00 stop runs, the second
	// schedule still plans nothing for it.
	e.clock.SetTime(at(19, 8, 0))
	e.convergedSince(weekName, at(19, 8, 0), 400)
	key := e.deployment("md-qwen32b").Annotations[gpuv1.TransitionKeyAnnotation]
	if week := e.schedule(weekName); !strings.HasPrefix(key, string(week.UID)+"/qwen32b/") {
		t.Errorf("qwen32b last changed by step %q, want one of %s (%s)", key, weekName, week.UID)
	}
	batch = e.targetStatus("other-team", "batch")
	if batch.Reason != controller.ReasonTargetOwned || len(batch.Steps) != 0 {
		t.Errorf("other-team after 08:00: %s, want TargetOwned with no steps", describe(batch))
	}
	if n := obs.scaleChanges("md-qwen32b"); n != 1 {
		t.Errorf("qwen32b scale changed %d times, want once (the week schedule's stop)", n)
	}
}
