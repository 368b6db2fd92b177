package schedule

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// After the 08:00 swap someone stops llama70b by hand. The schedule reports
// DriftDetected and leaves the workload as the person set it (and does not
// start qwen32b into the freed GPUs); the 18:00 interval starts from what is
// there.
func TestDriftDetectedNotReverted(t *testing.T) {
	e, obs := nightPool(t, at(19, 7, 0))
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)
	e.clock.SetTime(at(19, 8, 0))
	e.convergedSince(weekName, at(19, 8, 0), 400)

	e.scaleByHand("md-llama70b", 0)
	llama := e.waitReason(weekName, "llama70b", v1alpha1.TargetPhaseDrifted, controller.ReasonDriftDetected, 50)
	expectTerminal(t, llama, v1alpha1.TargetPhaseDrifted, controller.ReasonDriftDetected,
		"Deployment md-llama70b has 0 replicas but the intent (window business-hours) is Running; not reverted until the intent changes",
		"Fix: The workload was changed by hand; restore it yourself or wait for the next intent interval.")
	e.waitEvent(weekName, v1.EventTypeWarning, controller.ReasonDriftDetected, "target llama70b: Drifted")

	e.tick(24) // two minutes of passes
	if r := e.replicas("md-llama70b"); r != 0 {
		t.Errorf("llama70b reverted to %d replicas, want 0 as set by hand", r)
	}
	if n := obs.scaleChanges("md-llama70b"); n != 2 {
		t.Errorf("llama70b scale changed %d times, want 2 (the 08:00 start and the manual stop)", n)
	}
	if r := e.replicas("md-qwen32b"); r != 0 {
		t.Errorf("qwen32b started into the freed GPUs: replicas %d", r)
	}
	if st := e.targetStatus(weekName, "llama70b"); st.Reason != controller.ReasonDriftDetected {
		t.Errorf("llama70b two minutes later: %s", describe(st))
	}

	// 18:00: llama70b's new intent (Stopped) is already met; qwen32b starts.
	e.clock.SetTime(at(19, 18, 0))
	e.convergedSince(weekName, at(19, 18, 0), 400)
	if st := e.targetStatus(weekName, "llama70b"); len(st.Steps) != 0 {
		t.Errorf("llama70b at 18:00: steps %s, want none (already stopped)", describeSteps(st.Steps))
	}
	if q := e.replicas("md-qwen32b"); q != 1 {
		t.Errorf("qwen32b at 18:00: replicas %d, want 1", q)
	}
	if n := obs.scaleChanges("md-llama70b"); n != 2 {
		t.Errorf("llama70b scale changed %d times by 18:00, want still 2", n)
	}
}
