package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/validation"
)

// errConflict ends a pass whose status write lost a compare-and-swap: another
// writer (a second controller, a user) changed the schedule; the next pass
// starts from what it wrote.
var errConflict = errors.New("status changed concurrently")

// pass is one evaluation of one schedule at one instant.
type pass struct {
	c      *Controller
	ds     *v1alpha1.DeploySchedule
	now    time.Time
	gate   Gate
	gateOK bool // gate on and mode Enforce: steps may be submitted
	// observe: status only (Observe mode or observe gate).
	observe bool
	targets []*target
	// requeue is the soonest the schedule needs another look.
	requeue time.Duration
	// events are emitted after the final status write.
	events []event
	// orig is the status as read; written the status last written.
	orig    v1alpha1.DeployScheduleStatus
	written *v1alpha1.DeployScheduleStatus
}

// target is one spec target during a pass.
type target struct {
	spec     v1alpha1.ScheduleTarget
	status   *v1alpha1.TargetStatus
	interval schedule.Interval
	wl       *workload
	// ineligible is the eligibility problem found this pass (reason, message).
	ineligibleReason, ineligibleMsg string
	before                          v1alpha1.TargetStatus
}

type event struct {
	warning         bool
	reason, message string
}

// Reconcile runs one pass over the schedule namespace/name and returns when it
// wants the next one.
func (c *Controller) Reconcile(ctx context.Context, namespace, name string) (time.Duration, error) {
	ds, err := c.schedules.get(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	ds.APIVersion, ds.Kind = v1alpha1.SchemeGroupVersion.String(), "DeploySchedule"
	p := &pass{c: c, ds: ds, now: c.opts.Clock.Now(), requeue: c.opts.PassPeriod, orig: *ds.Status.DeepCopy()}
	logger := klog.FromContext(ctx).WithValues("deploySchedule", klog.KObj(ds))
	ctx = klog.NewContext(ctx, logger)
	err = p.run(ctx)
	for _, e := range p.events {
		typ := "Normal"
		if e.warning {
			typ = "Warning"
		}
		c.opts.Recorder.Event(ds, typ, e.reason, e.message)
	}
	if errors.Is(err, errConflict) {
		logger.V(3).Info("Status conflict, retrying soon")
		return time.Second, nil
	}
	return p.requeue, err
}

func (p *pass) run(ctx context.Context) error {
	ds := p.ds
	if errs := validation.ValidateDeploySchedule(ds); len(errs) > 0 {
		p.setCondition("Valid", metav1.ConditionFalse, ReasonInvalidSchedule, withFix(ReasonInvalidSchedule, errs.ToAggregate().Error()))
		return p.finish(ctx)
	}
	compiled, err := p.c.compile(ds)
	if err != nil {
		p.setCondition("Valid", metav1.ConditionFalse, ReasonInvalidSchedule, withFix(ReasonInvalidSchedule, err.Error()))
		return p.finish(ctx)
	}
	p.setCondition("Valid", metav1.ConditionTrue, "Valid", "the schedule compiles")
	intervals, next, err := currentIntervals(compiled, ds, p.now, p.c.opts.Lookback)
	if err != nil {
		return err
	}
	if !next.IsZero() {
		p.wantRequeue(next.Sub(p.now))
	}
	gate, gateMsg := readGate(ctx, p.c.opts.Client, p.c.opts.GateNamespace, p.c.opts.GateName)
	if gateMsg != "" {
		klog.FromContext(ctx).V(2).Info("Gate is closed", "reason", gateMsg)
	}
	p.gate = gate
	ds.Status.Gate = string(gate)
	p.observe = ds.Spec.Mode == v1alpha1.ScheduleModeObserve || gate == GateObserve
	p.gateOK = gate == GateOn && !p.observe

	retry := ""
	if v := ds.Annotations[gpuv1.ApplyNowAnnotation]; v != "" && v != ds.Status.ApplyNowHandled {
		retry = v
		if p.gateOK {
			ds.Status.ApplyNowHandled = v
		}
	}
	if err := p.loadTargets(ctx, intervals); err != nil {
		return err
	}
	// Steps left Submitting by a crash or a lost race are finished first, with
	// their own keys, before anything new is planned.
	if err := p.finishSubmitting(ctx); err != nil {
		return err
	}
	for _, t := range p.targets {
		p.openInterval(t, retry)
	}
	if p.gateOK {
		if err := p.execute(ctx); err != nil {
			return err
		}
	}
	for _, t := range p.targets {
		p.derivePhase(t)
	}
	return p.finish(ctx)
}

// loadTargets reads each target's workload and checks ownership and eligibility.
func (p *pass) loadTargets(ctx context.Context, intervals map[string]current) error {
	byName := map[string]*v1alpha1.TargetStatus{}
	for i := range p.ds.Status.Targets {
		byName[p.ds.Status.Targets[i].Name] = &p.ds.Status.Targets[i]
	}
	var statuses []v1alpha1.TargetStatus
	for _, spec := range p.ds.Spec.Targets {
		if st, ok := byName[spec.Name]; ok {
			statuses = append(statuses, *st)
		} else {
			statuses = append(statuses, v1alpha1.TargetStatus{Name: spec.Name})
		}
	}
	p.ds.Status.Targets = statuses
	for i, spec := range p.ds.Spec.Targets {
		t := &target{spec: spec, status: &p.ds.Status.Targets[i], interval: intervals[spec.Name].Interval}
		t.before = *t.status.DeepCopy()
		if err := p.checkEligibility(ctx, t); err != nil {
			return err
		}
		p.targets = append(p.targets, t)
	}
	return nil
}

// openInterval plans the target's step when its current interval is one the
// controller has not processed yet (docs/schedule.md: a transition happens only when a
// new interval opens; after downtime, one transition to the current intent).
func (p *pass) openInterval(t *target, retry string) {
	st := t.status
	newInterval := st.LastProcessedInterval == nil || !st.LastProcessedInterval.Time.Equal(t.interval.Start)
	if !newInterval && retry != "" && p.gateOK && st.Phase == v1alpha1.TargetPhaseFailed {
		newInterval = true
	} else {
		retry = ""
	}
	if !newInterval {
		return
	}
	// The old interval's waits end here: an acquire still waiting for capacity
	// fails, nothing is restarted.
	for i := range st.Steps {
		s := &st.Steps[i]
		if s.Phase == v1alpha1.StepPlanned || s.Phase == v1alpha1.StepAccepted {
			if s.Reason == ReasonCapacityWait {
				p.failStep(t, s, ReasonCapacityUnavailable, "the intent interval ended while waiting for capacity: "+s.Message)
			} else if s.Phase == v1alpha1.StepPlanned {
				s.Phase, s.Reason, s.Message = v1alpha1.StepFailed, "Superseded", "a new intent interval opened before the step ran"
				s.CompletedAt = p.nowTime()
			}
		}
	}
	st.Desired = statusIntent(t.interval)
	st.LastProcessedInterval = p.nowTimeOf(t.interval.Start)
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
	klog.Background().V(2).Info("Transition planned", "deploySchedule", klog.KObj(p.ds), "target", t.spec.Name,
		"action", step.Action, "key", step.Key)
}

func (p *pass) wantRequeue(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if d < p.requeue {
		p.requeue = d
	}
}

func (p *pass) nowTime() *metav1.Time { t := metav1.NewTime(p.now); return &t }

func (p *pass) nowTimeOf(at time.Time) *metav1.Time { t := metav1.NewTime(at); return &t }

func (p *pass) setCondition(typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&p.ds.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg, 2048),
		ObservedGeneration: p.ds.Generation, LastTransitionTime: metav1.NewTime(p.now),
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
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
