package schedule

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// expectGate waits until the schedule reports the gate and both targets
// wait on it with their planned step unsubmitted.
func (e *env) expectGate(gate string) {
	e.t.Helper()
	e.advance("status.gate "+gate, 50, func() (bool, string) {
		g := e.schedule(weekName).Status.Gate
		return g == gate, g
	})
	for target, step := range map[string]string{"qwen32b": "Stop", "llama70b": "Start"} {
		st := e.waitReason(weekName, target, v1alpha1.TargetPhaseWaiting, controller.ReasonGateOff, 50)
		expectMessage(e.t, target, st.Message, "the cluster-wide gate is "+gate+": "+step+" "+target+" is not submitted")
		if len(st.Steps) != 1 || st.Steps[0].Phase != v1alpha1.StepPlanned {
			e.t.Errorf("%s: steps %s, want one Planned", target, describeSteps(st.Steps))
		}
	}
}

// With the gate off across 08:00 nothing is submitted and the status says
// why; a missing or malformed gate ConfigMap counts as off (fail closed).
// Turning the gate on within the interval runs the planned transition.
func TestGateOffAndUnreadable(t *testing.T) {
	e, obs := nightPool(t, at(19, 7, 0))
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)

	e.setGate("off")
	e.clock.SetTime(at(19, 8, 0))
	e.expectGate("off")
	e.waitEvent(weekName, v1.EventTypeNormal, controller.ReasonGateOff, "target qwen32b: Waiting", "gate is off")
	e.tick(12)
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b", "md-bge-embed")

	e.setGate("maybe") // malformed: not off, observe or on
	e.expectGate("unreadable")
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b")

	if err := e.cp.Client.CoreV1().ConfigMaps(gateNS).Delete(e.ctx, controller.DefaultGateName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.tick(12)
	e.expectGate("unreadable")
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b")

	// The gate opens within the 08:00 interval: the planned steps run.
	e.setGate("on")
	e.convergedSince(weekName, at(19, 8, 0), 400)
	if q, l := e.replicas("md-qwen32b"), e.replicas("md-llama70b"); q != 0 || l != 1 {
		t.Errorf("after the gate opened: qwen32b %d llama70b %d replicas, want 0 and 1", q, l)
	}
	if g := e.schedule(weekName).Status.Gate; g != "on" {
		t.Errorf("status.gate %q, want on", g)
	}
}

// mode: Observe computes and reports the 08:00 transition and changes
// nothing; so does the cluster-wide observe gate for an Enforce schedule.
// Once both allow it, the transition the status showed runs.
func TestObserveMode(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{})
	ds := weekSchedule(t)
	ds.Spec.Mode = v1alpha1.ScheduleModeObserve
	e.createScheduleObject(ds)
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)

	e.clock.SetTime(at(19, 8, 0))
	expectObserved := func() {
		t.Helper()
		for target, would := range map[string]string{
			"qwen32b":  "observe only: would Stop qwen32b to 0 replicas (window business-hours)",
			"llama70b": "observe only: would Start llama70b to 1 replicas (window business-hours)",
		} {
			st := e.waitReason(weekName, target, v1alpha1.TargetPhaseObserved, controller.ReasonObserveOnly, 50)
			expectMessage(t, target, st.Message, would)
			if st.Desired == nil || st.Desired.Source != "business-hours" || st.Desired.IntervalStart == nil || !st.Desired.IntervalStart.Time.Equal(at(19, 8, 0)) {
				t.Errorf("%s: desired %+v, want the business-hours interval from 08:00", target, st.Desired)
			}
			if len(st.Steps) != 1 || st.Steps[0].Phase != v1alpha1.StepPlanned || st.Steps[0].Key == "" {
				t.Errorf("%s: steps %s, want one Planned step with its key", target, describeSteps(st.Steps))
			}
		}
	}
	expectObserved()
	e.waitEvent(weekName, v1.EventTypeNormal, controller.ReasonObserveOnly, "would Stop qwen32b")
	e.tick(24)
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b", "md-bge-embed")

	// Enforce, but the cluster-wide gate says observe.
	e.setGate("observe")
	e.updateSchedule(weekName, func(ds *v1alpha1.DeploySchedule) { ds.Spec.Mode = v1alpha1.ScheduleModeEnforce })
	e.tick(12)
	expectObserved()
	if g := e.schedule(weekName).Status.Gate; g != "observe" {
		t.Errorf("status.gate %q, want observe", g)
	}
	e.expectUntouched(obs, "md-qwen32b", "md-llama70b", "md-bge-embed")

	e.setGate("on")
	e.convergedSince(weekName, at(19, 8, 0), 400)
	if q, l := e.replicas("md-qwen32b"), e.replicas("md-llama70b"); q != 0 || l != 1 {
		t.Errorf("enforced: qwen32b %d llama70b %d replicas, want 0 and 1", q, l)
	}
}
