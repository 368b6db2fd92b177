package controller

import (
	"context"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// derivePhase sets the target's phase, reason and message from its steps,
// its eligibility and the workload as observed, and queues an Event when they
// change.
func (p *pass) derivePhase(t *target) {
	st := t.status
	phase, reason, msg := p.phaseOf(t)
	st.Phase, st.Reason, st.Message = phase, reason, truncate(msg, 2048)
	if phase != t.before.Phase || reason != t.before.Reason {
		t.before.Phase, t.before.Reason = phase, reason
		st.LastTransitionTime = p.nowTime()
		warning := phase == v1alpha1.TargetPhaseFailed || phase == v1alpha1.TargetPhaseDrifted || reason == ReasonCapacityWait
		p.events = append(p.events, event{warning: warning, reason: reason,
			message: truncate(fmt.Sprintf("target %s: %s: %s", t.spec.Name, phase, msg), 1024)})
		if phase == v1alpha1.TargetPhaseConverged && st.Desired != nil && st.Desired.IntervalStart != nil && len(st.Steps) > 0 {
			p.c.metrics.boundaryLag.Observe(p.now.Sub(st.Desired.IntervalStart.Time).Seconds())
		}
	}
}

func (p *pass) phaseOf(t *target) (v1alpha1.TargetPhase, string, string) {
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
			if p.observe {
				return v1alpha1.TargetPhaseObserved, ReasonObserveOnly, observeMessage(t)
			}
			return v1alpha1.TargetPhaseDrifted, ReasonDriftDetected, withFix(ReasonDriftDetected, fmt.Sprintf(
				"%s %s has %d replicas but the intent (window %s) is %s; not reverted until the intent changes",
				t.wl.Kind, t.wl.Name, t.wl.Replicas, t.interval.Source, describeIntent(t.interval.Intent)))
		}
		return v1alpha1.TargetPhaseConverged, ReasonConverged, fmt.Sprintf("at the intent of window %s: %s", t.interval.Source, describeIntent(t.interval.Intent))
	}
	switch {
	case p.observe && active.Phase == v1alpha1.StepPlanned:
		return v1alpha1.TargetPhaseObserved, ReasonObserveOnly, observeMessage(t)
	case !p.gateOK && active.Phase == v1alpha1.StepPlanned:
		return v1alpha1.TargetPhaseWaiting, ReasonGateOff, fmt.Sprintf("the cluster-wide gate is %s: %s %s is not submitted", p.gate, active.Action, t.spec.Name)
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

// persist writes the status now, with the schedule's resourceVersion. The
// in-memory status stays the one written; only the version moves on.
func (p *pass) persist(ctx context.Context) error {
	for _, t := range p.targets {
		p.derivePhase(t)
	}
	p.ds.Status.ObservedGeneration = p.ds.Generation
	p.ds.Status.LastPassTime = p.nowTime()
	got, err := p.c.schedules.updateStatus(ctx, p.ds)
	if apierrors.IsConflict(err) {
		return errConflict
	}
	if err != nil {
		return err
	}
	p.ds.ResourceVersion = got.ResourceVersion
	p.written = p.ds.Status.DeepCopy()
	return nil
}

// finish computes the summary fields and writes the status if it changed.
func (p *pass) finish(ctx context.Context) error {
	ds := p.ds
	ds.Status.TargetCount = int32(len(ds.Spec.Targets))
	var converged, serving int32
	for _, t := range ds.Status.Targets {
		if t.Phase == v1alpha1.TargetPhaseConverged {
			converged++
		}
		if t.Observed != nil && t.Observed.ReadyReplicas > 0 {
			serving++
		}
	}
	ds.Status.ConvergedCount = converged
	p.c.metrics.serving.WithLabelValues(ds.Namespace, ds.Name).Set(float64(serving))
	if converged == ds.Status.TargetCount {
		p.setCondition("Ready", metav1.ConditionTrue, ReasonConverged, "every target is at its current intent")
	} else {
		p.setCondition("Ready", metav1.ConditionFalse, "NotConverged", fmt.Sprintf("%d of %d targets at their current intent", converged, ds.Status.TargetCount))
	}
	base := p.written
	if base == nil {
		base = &p.orig
	}
	cmp := ds.Status.DeepCopy()
	cmp.LastPassTime = base.LastPassTime
	if apiequality.Semantic.DeepEqual(cmp, base) && ds.Status.ObservedGeneration == ds.Generation {
		return nil
	}
	return p.persist(ctx)
}

// timeout reads one of spec.timeouts, falling back to def.
func (p *pass) timeout(t *v1alpha1.ScheduleTimeouts, get func(*v1alpha1.ScheduleTimeouts) *v1alpha1.Duration, def time.Duration) time.Duration {
	if t == nil || get(t) == nil {
		return def
	}
	if d, err := schedule.ParseDuration(*get(t)); err == nil {
		return d
	}
	return def
}
