package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// Step actions (the values of TransitionStep.Action).
const (
	actionStop  = string(schedule.ActionStop)
	actionStart = string(schedule.ActionStart)
	actionScale = string(schedule.ActionScale)
)

// planner is the planning step (docs/schedule.md, "A pass", step 5): it opens
// a target's transition when its current interval is one the controller has
// not processed yet. A transition happens only when a new interval opens;
// after downtime, one transition goes to the current intent.
type planner struct {
	ds      *v1alpha1.DeploySchedule
	now     time.Time
	enforce bool
	// retry is a new rota.dev/apply-now value ("" if none): it re-plans a
	// target whose transition failed in the current interval.
	retry string
	out   outcomes
}

// open plans t's step for a new interval (or a retry), ending what the old
// interval left waiting.
func (p planner) open(ctx context.Context, t *target) {
	st := t.status
	retry := p.retry
	newInterval := st.LastProcessedInterval == nil || !st.LastProcessedInterval.Time.Equal(t.interval.Start)
	if !newInterval && retry != "" && p.enforce && st.Phase == v1alpha1.TargetPhaseFailed {
		newInterval = true
	} else {
		retry = ""
	}
	if !newInterval {
		return
	}
	p.endOldInterval(st)
	st.Desired = statusIntent(t.interval)
	st.LastProcessedInterval = timeAt(t.interval.Start)
	st.Steps = nil
	st.Reason, st.Message = "", ""
	if t.wl == nil {
		return
	}
	step, ok := planStep(t.interval.Intent, t.wl)
	if !ok {
		return
	}
	step.Key = stepKey(p.ds, t.spec.Name, t.interval.Start, step.Action, retry)
	st.Steps = []v1alpha1.TransitionStep{step}
	klog.FromContext(ctx).V(2).Info("Transition planned", "target", t.spec.Name, "action", step.Action, "key", step.Key)
}

// endOldInterval ends the old interval's waits: an acquire still waiting for
// capacity fails, a step not run yet is superseded, nothing is restarted.
func (p planner) endOldInterval(st *v1alpha1.TargetStatus) {
	for i := range st.Steps {
		s := &st.Steps[i]
		if s.Phase != v1alpha1.StepPlanned && s.Phase != v1alpha1.StepAccepted {
			continue
		}
		if s.Reason == ReasonCapacityWait {
			p.out.fail(s, ReasonCapacityUnavailable, "the intent interval ended while waiting for capacity: "+s.Message)
		} else if s.Phase == v1alpha1.StepPlanned {
			s.Phase, s.Reason, s.Message = v1alpha1.StepFailed, "Superseded", "a new intent interval opened before the step ran"
			s.CompletedAt = timeAt(p.now)
		}
	}
}

// planStep compares the workload as observed with the intent and returns the
// one step that reaches it, if any. Planning from the observed scale (not from
// the previous intent) makes a missed boundary or a first pass land on the
// current intent in one step.
func planStep(in schedule.Intent, wl *workload) (v1alpha1.TransitionStep, bool) {
	cur := wl.Replicas
	mk := func(action string, group v1alpha1.StepGroup, replicas int32) (v1alpha1.TransitionStep, bool) {
		return v1alpha1.TransitionStep{Action: action, Group: group, Replicas: ptr.To(replicas), Phase: v1alpha1.StepPlanned}, true
	}
	switch {
	case in.State == v1alpha1.StateStopped:
		if cur > 0 {
			return mk(actionStop, v1alpha1.StepGroupRelease, 0)
		}
	case cur == 0:
		n := in.Replicas
		if n == 0 {
			n = restoreReplicas(wl)
		}
		return mk(actionStart, v1alpha1.StepGroupAcquire, n)
	case in.Replicas != 0 && cur > in.Replicas:
		return mk(actionScale, v1alpha1.StepGroupRelease, in.Replicas)
	case in.Replicas != 0 && cur < in.Replicas:
		return mk(actionScale, v1alpha1.StepGroupAcquire, in.Replicas)
	}
	return v1alpha1.TransitionStep{}, false
}

// restoreReplicas is the scale an unpinned Start brings a workload back to:
// what it had when a schedule stopped it, else 1.
func restoreReplicas(wl *workload) int32 {
	if v, err := strconv.ParseInt(wl.Annotations[gpuv1.ReplicasBeforeStopAnnotation], 10, 32); err == nil && v > 0 {
		return int32(v)
	}
	return 1
}

// stepKey is the idempotency key of a step: schedule UID, target, interval
// start and action (plus the apply-now value of a retry).
func stepKey(ds *v1alpha1.DeploySchedule, target string, start time.Time, action string, retry string) string {
	key := fmt.Sprintf("%s/%s/%s/%s", ds.UID, target, start.UTC().Format(time.RFC3339), strings.ToLower(action))
	if retry != "" {
		key += "#" + truncate(retry, 32)
	}
	return key
}

// replicasOf is a step's target scale.
func replicasOf(s *v1alpha1.TransitionStep) int32 { return ptr.Deref(s.Replicas, 0) }
