package controller

import (
	"fmt"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// phaseOf is a target's phase, reason and message, from its steps, its
// eligibility, the workload as observed and the gate.
func phaseOf(gate gateState, t *target) (v1alpha1.TargetPhase, string, string) {
	var active *v1alpha1.TransitionStep
	for i := range t.status.Steps {
		s := &t.status.Steps[i]
		if s.Phase != v1alpha1.StepSucceeded {
			active = s
			break
		}
	}
	if active != nil && active.Phase == v1alpha1.StepFailed && active.Reason != "Superseded" {
		return v1alpha1.TargetPhaseFailed, active.Reason, active.Message
	}
	if active == nil || active.Phase == v1alpha1.StepFailed {
		if t.ineligibleReason != "" {
			return v1alpha1.TargetPhaseFailed, t.ineligibleReason, withFix(t.ineligibleReason, t.ineligibleMsg)
		}
		if t.wl != nil && !atIntent(t.interval.Intent, t.wl) {
			if gate.observe {
				return v1alpha1.TargetPhaseObserved, ReasonObserveOnly, observeMessage(t)
			}
			return v1alpha1.TargetPhaseDrifted, ReasonDriftDetected, withFix(ReasonDriftDetected, fmt.Sprintf(
				"%s %s has %d replicas but the intent (window %s) is %s; not reverted until the intent changes",
				t.wl.Kind, t.wl.Name, t.wl.Replicas, t.interval.Source, describeIntent(t.interval.Intent)))
		}
		return v1alpha1.TargetPhaseConverged, ReasonConverged, fmt.Sprintf("at the intent of window %s: %s", t.interval.Source, describeIntent(t.interval.Intent))
	}
	switch {
	case gate.observe && active.Phase == v1alpha1.StepPlanned:
		return v1alpha1.TargetPhaseObserved, ReasonObserveOnly, observeMessage(t)
	case !gate.enforce && active.Phase == v1alpha1.StepPlanned:
		return v1alpha1.TargetPhaseWaiting, ReasonGateOff, fmt.Sprintf("the cluster-wide gate is %s: %s %s is not submitted", gate.gate, active.Action, t.spec.Name)
	case t.ineligibleReason != "" && active.Phase == v1alpha1.StepPlanned:
		return v1alpha1.TargetPhaseFailed, t.ineligibleReason, withFix(t.ineligibleReason, t.ineligibleMsg)
	case active.Reason == ReasonCapacityWait:
		return v1alpha1.TargetPhaseWaiting, ReasonCapacityWait, active.Message
	case active.Phase == v1alpha1.StepPlanned:
		if active.Group == v1alpha1.StepGroupAcquire {
			return v1alpha1.TargetPhasePending, ReasonWaitRelease, fmt.Sprintf("%s waits until every release step of the transition has converged", active.Action)
		}
		return v1alpha1.TargetPhasePending, ReasonWaitAcquire, fmt.Sprintf("%s waits for its turn", active.Action)
	case active.Group == v1alpha1.StepGroupRelease:
		return v1alpha1.TargetPhaseReleasing, ReasonReleasing, active.Message
	default:
		return v1alpha1.TargetPhaseAcquiring, ReasonAcquiring, active.Message
	}
}

func observeMessage(t *target) string {
	if len(t.status.Steps) > 0 {
		s := t.status.Steps[0]
		return fmt.Sprintf("observe only: would %s %s to %d replicas (window %s)", s.Action, t.spec.Name, replicasOf(&s), t.interval.Source)
	}
	return fmt.Sprintf("observe only: intent %s (window %s)", describeIntent(t.interval.Intent), t.interval.Source)
}

// atIntent reports whether the workload's scale matches the intent.
func atIntent(in schedule.Intent, wl *workload) bool {
	switch {
	case in.State == v1alpha1.StateStopped:
		return wl.Replicas == 0
	case in.Replicas != 0:
		return wl.Replicas == in.Replicas
	default:
		return wl.Replicas > 0
	}
}

func describeIntent(in schedule.Intent) string {
	if in.State == v1alpha1.StateRunning && in.Replicas != 0 {
		return fmt.Sprintf("Running with %d replicas", in.Replicas)
	}
	return string(in.State)
}
