package schedule

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// acquireFirstWeek is the week-swap schedule with transitionOrder
// AcquireFirst: at 08:00 llama70b (8 GPUs) is started before qwen32b (6)
// is stopped.
func acquireFirstWeek(t *testing.T) *v1alpha1.DeploySchedule {
	ds := weekSchedule(t)
	ds.Spec.TransitionOrder = v1alpha1.TransitionOrderAcquireFirst
	return ds
}

// TestAcquireFirstStartsBeforeItStops: with room for both shifts (16 GPUs),
// llama70b is started and ready before qwen32b is stopped, so the pool
// never serves neither; with ReleaseFirst (TestWeekSwap) it is the other
// way round.
func TestAcquireFirstStartsBeforeItStops(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{gpus: 16})
	e.createScheduleObject(acquireFirstWeek(t))
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)

	e.clock.SetTime(at(19, 8, 0))
	e.convergedSince(weekName, at(19, 8, 0), 200)
	llama, qwen := e.targetStatus(weekName, "llama70b"), e.targetStatus(weekName, "qwen32b")
	if len(llama.Steps) != 1 || len(qwen.Steps) != 1 || llama.Steps[0].CompletedAt == nil || qwen.Steps[0].SubmittedAt == nil {
		t.Fatalf("steps: llama70b %s; qwen32b %s", describeSteps(llama.Steps), describeSteps(qwen.Steps))
	}
	if qwen.Steps[0].SubmittedAt.Before(llama.Steps[0].CompletedAt) {
		t.Errorf("qwen32b's stop was submitted at %s, before llama70b was ready at %s",
			qwen.Steps[0].SubmittedAt.Time, llama.Steps[0].CompletedAt.Time)
	}
	// In the order the API server wrote it: when qwen32b was scaled to 0,
	// llama70b's pod already held its 8 GPUs.
	stops := 0
	obs.replay(func(before *clusterState, r observation) {
		if r.kind != "deployment" || r.name != "md-qwen32b" || r.replicas != 0 || before.replicas["md-qwen32b"] == 0 {
			return
		}
		stops++
		if pods, devices := before.podsOf("md-llama70b"); pods != 1 || devices != 8 {
			t.Errorf("qwen32b stopped while llama70b had %d pods holding %d GPUs, want 1 holding 8", pods, devices)
		}
	})
	if stops != 1 {
		t.Errorf("qwen32b was stopped %d times, want once", stops)
	}
}

// TestAcquireFirstWithoutRoomStopsNothing: on the 10-GPU night pool there
// is no room for llama70b next to qwen32b. llama70b waits for capacity and
// fails with CapacityUnavailable; qwen32b's stop is not run, so it keeps
// serving (with ReleaseFirst it would have been stopped first).
func TestAcquireFirstWithoutRoomStopsNothing(t *testing.T) {
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{})
	qwenPods := e.podNames("md-qwen32b")
	e.createScheduleObject(acquireFirstWeek(t))
	e.startController(nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)

	e.clock.SetTime(at(19, 8, 0))
	llama := e.waitReason(weekName, "llama70b", v1alpha1.TargetPhaseFailed, controller.ReasonCapacityUnavailable, 400)
	t.Logf("llama70b: %s", llama.Message)
	qwen := e.waitTarget(weekName, "qwen32b", "its stop not run", 50, func(st v1alpha1.TargetStatus) bool {
		return len(st.Steps) == 1 && st.Steps[0].Reason == controller.ReasonTransitionAborted
	})
	expectMessage(t, "qwen32b's step", qwen.Steps[0].Message, "not run")
	e.tick(10)
	if r := ptr.Deref(e.deployment("md-qwen32b").Spec.Replicas, 1); r != 1 {
		t.Errorf("qwen32b replicas %d, want 1: nothing is stopped when the incoming shift cannot start", r)
	}
	if got := e.podNames("md-qwen32b"); len(got) != len(qwenPods) || got[0] != qwenPods[0] {
		t.Errorf("qwen32b pods %v, want its pods %v untouched", got, qwenPods)
	}
	e.expectUntouched(obs, "md-qwen32b", "md-bge-embed")
}
