package controller

import (
	"context"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// event is an Event to emit on the schedule once the pass ends.
type event struct {
	warning         bool
	reason, message string
}

// statusRecord is the status step (docs/schedule.md, "A pass", step 7) and
// the schedule's status during one pass: it derives each target's phase,
// queues an Event on every phase or reason change, and writes the status
// with compare-and-swap — at the end of the pass when it changed (finish),
// and in the middle of a submission for crash safety (checkpoint).
type statusRecord struct {
	ds      *v1alpha1.DeploySchedule
	now     time.Time
	store   schedules
	metrics *controllerMetrics
	// gate and targets are set by the pass once the gate step and the
	// ownership and eligibility steps have run.
	gate    gateState
	targets []*target
	// events are emitted after the final status write.
	events []event
	// orig is the status as read; written the status last written.
	orig    v1alpha1.DeployScheduleStatus
	written *v1alpha1.DeployScheduleStatus
}

func newStatusRecord(ds *v1alpha1.DeploySchedule, now time.Time, store schedules, m *controllerMetrics) *statusRecord {
	return &statusRecord{ds: ds, now: now, store: store, metrics: m, orig: *ds.Status.DeepCopy()}
}

// event queues an Event.
func (r *statusRecord) event(e event) { r.events = append(r.events, e) }

// emit sends the queued Events.
func (r *statusRecord) emit(recorder record.EventRecorder) {
	for _, e := range r.events {
		typ := "Normal"
		if e.warning {
			typ = "Warning"
		}
		recorder.Event(r.ds, typ, e.reason, e.message)
	}
}

// derivePhases sets every target's phase, reason and message.
func (r *statusRecord) derivePhases() {
	for _, t := range r.targets {
		r.derivePhase(t)
	}
}

// derivePhase sets the target's phase, reason and message from its steps,
// its eligibility and the workload as observed, and queues an Event when they
// change.
func (r *statusRecord) derivePhase(t *target) {
	st := t.status
	phase, reason, msg := phaseOf(r.gate, t)
	st.Phase, st.Reason, st.Message = phase, reason, truncate(msg, 2048)
	if phase == t.before.Phase && reason == t.before.Reason {
		return
	}
	t.before.Phase, t.before.Reason = phase, reason
	st.LastTransitionTime = timeAt(r.now)
	warning := phase == v1alpha1.TargetPhaseFailed || phase == v1alpha1.TargetPhaseDrifted || reason == ReasonCapacityWait
	r.event(event{warning: warning, reason: reason,
		message: truncate(fmt.Sprintf("target %s: %s: %s", t.spec.Name, phase, msg), 1024)})
	if phase == v1alpha1.TargetPhaseConverged && st.Desired != nil && st.Desired.IntervalStart != nil && len(st.Steps) > 0 {
		r.metrics.boundaryLag.Observe(r.now.Sub(st.Desired.IntervalStart.Time).Seconds())
	}
}

// conditionMessageMax is the longest condition message the controller
// writes; a longer one is cut.
const conditionMessageMax = 2048

// setCondition sets one of the schedule's conditions.
func (r *statusRecord) setCondition(typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&r.ds.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg, conditionMessageMax),
		ObservedGeneration: r.ds.Generation, LastTransitionTime: metav1.NewTime(r.now),
	})
}

// checkpoint writes the status now, with the schedule's resourceVersion. The
// in-memory status stays the one written; only the version moves on.
func (r *statusRecord) checkpoint(ctx context.Context) error {
	r.derivePhases()
	r.ds.Status.ObservedGeneration = r.ds.Generation
	r.ds.Status.LastPassTime = timeAt(r.now)
	got, err := r.store.updateStatus(ctx, r.ds)
	if apierrors.IsConflict(err) {
		return errConflict
	}
	if err != nil {
		return err
	}
	r.ds.ResourceVersion = got.ResourceVersion
	r.written = r.ds.Status.DeepCopy()
	return nil
}

// finish computes the summary fields and writes the status if it changed.
func (r *statusRecord) finish(ctx context.Context) error {
	ds := r.ds
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
	r.metrics.serving.WithLabelValues(ds.Namespace, ds.Name).Set(float64(serving))
	if converged == ds.Status.TargetCount {
		r.setCondition("Ready", metav1.ConditionTrue, ReasonConverged, "every target is at its current intent")
	} else {
		r.setCondition("Ready", metav1.ConditionFalse, "NotConverged", fmt.Sprintf("%d of %d targets at their current intent", converged, ds.Status.TargetCount))
	}
	base := r.written
	if base == nil {
		base = &r.orig
	}
	cmp := ds.Status.DeepCopy()
	cmp.LastPassTime = base.LastPassTime
	if apiequality.Semantic.DeepEqual(cmp, base) && ds.Status.ObservedGeneration == ds.Generation {
		return nil
	}
	return r.checkpoint(ctx)
}
