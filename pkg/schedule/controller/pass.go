package controller

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// errConflict ends a pass whose status write lost a compare-and-swap: another
// writer (a second controller, a user) changed the schedule; the next pass
// starts from what it wrote.
var errConflict = errors.New("status changed concurrently")

// pass is one evaluation of one schedule at one instant. It is the
// orchestrator of docs/schedule.md's "A pass": it calls the steps in order
// — gate, ownership, eligibility, planning, then preflight, release, acquire
// and convergence, then status — and hands each what it needs. No step calls
// back into the pass or into a later step; the one write a step may ask for
// in its middle is the status checkpoint that crash safety needs.
type pass struct {
	c       *Controller
	ds      *v1alpha1.DeploySchedule
	now     time.Time
	gate    gateState
	targets []*target
	// requeue is the soonest the schedule needs another look.
	requeue time.Duration

	status      *statusRecord
	out         outcomes
	owners      ownership
	eligibility eligibility
	submit      submitter
	preflight   preflight
	release     releaser
	acquire     acquirer
	converge    convergence
}

// target is one spec target during a pass.
type target struct {
	spec     v1alpha1.ScheduleTarget
	status   *v1alpha1.TargetStatus
	interval schedule.Interval
	wl       *workload
	// ineligible is the ownership or eligibility problem found this pass
	// (reason, message).
	ineligibleReason, ineligibleMsg string
	before                          v1alpha1.TargetStatus
}

// planned is one step of the schedule's current transition with its target.
type planned struct {
	t *target
	s *v1alpha1.TransitionStep
}

// Reconcile runs one pass over the schedule namespace/name and returns when it
// wants the next one.
func (c *Controller) Reconcile(ctx context.Context, namespace, name string) (time.Duration, error) {
	ds, err := c.readSchedule(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	ds.APIVersion, ds.Kind = v1alpha1.SchemeGroupVersion.String(), "DeploySchedule"
	p := c.newPass(ds)
	logger := klog.FromContext(ctx).WithValues("deploySchedule", klog.KObj(ds))
	ctx = klog.NewContext(ctx, logger)
	err = p.run(ctx)
	p.status.emit(c.opts.Recorder)
	if errors.Is(err, errConflict) {
		logger.V(3).Info("Status conflict, retrying soon")
		return time.Second, nil
	}
	return p.requeue, err
}

// newPass builds a pass over ds at the clock's now, with its steps.
func (c *Controller) newPass(ds *v1alpha1.DeploySchedule) *pass {
	o := c.opts
	now := o.Clock.Now()
	out := outcomes{now: now, actions: c.metrics.actions}
	status := newStatusRecord(ds, now, c.schedules, c.metrics)
	pins := reservations{client: o.Client, dynamic: o.Dynamic, namespace: ds.Namespace}
	demand := demands{client: o.Client, pins: pins}
	aliases := aliasGuard{client: o.Client}
	submit := submitter{namespace: ds.Namespace, now: now, workloads: c.workloads, pins: pins,
		failpoints: o.Failpoints, actions: c.metrics.actions, status: status}
	return &pass{
		c: c, ds: ds, now: now, requeue: o.PassPeriod, status: status, out: out,
		owners:      ownership{index: c.informer, schedules: c.schedules},
		eligibility: eligibility{client: o.Client, workloads: c.workloads},
		submit:      submit,
		preflight: preflight{client: o.Client, namespace: ds.Namespace, aliases: aliases, demand: demand, out: out,
			schedule: ds.Name, budget: o.Budget},
		release: releaser{aliases: aliases, submit: submit, out: out},
		acquire: acquirer{client: o.Client, previewer: c.previewer, demand: demand, submit: submit, out: out,
			now: now, timeouts: ds.Spec.Timeouts, progress: o.ProgressPeriod},
		converge: convergence{client: o.Client, workloads: c.workloads, namespace: ds.Namespace, now: now,
			timeouts: ds.Spec.Timeouts, unschedulableGrace: o.UnschedulableGrace, out: out},
	}
}

// run is the pass, top to bottom (docs/schedule.md, "A pass").
func (p *pass) run(ctx context.Context) error {
	// 1. The schedule compiles, and each target's current interval.
	compiled, ok := p.validate()
	if !ok {
		return p.status.finish(ctx)
	}
	p.forecastCondition(ctx, compiled.Location())
	intervals, next, err := currentIntervals(compiled, p.ds, p.now, p.c.opts.Lookback)
	if err != nil {
		return err
	}
	if !next.IsZero() {
		p.wantRequeue(next.Sub(p.now))
	}
	// 2. Gate.
	p.gate = p.c.gate.gateFor(ctx, p.ds.Spec.Mode)
	p.status.gate = p.gate
	p.ds.Status.Gate = string(p.gate.gate)
	retry := p.applyNow()
	// 3. Ownership and eligibility of every target.
	if err := p.loadTargets(ctx, intervals); err != nil {
		return err
	}
	// 4. Steps left Submitting by a crash or a lost race are finished first,
	// with their own keys, before anything new is planned.
	if err := p.finishSubmitting(ctx); err != nil {
		return err
	}
	// 5. Planning.
	plan := planner{ds: p.ds, now: p.now, enforce: p.gate.enforce, retry: retry, out: p.out}
	for _, t := range p.targets {
		plan.open(ctx, t)
	}
	// 6. Preflight, release, acquire, convergence.
	if p.gate.enforce {
		if err := p.transition(ctx); err != nil {
			return err
		}
	}
	// 7. Status.
	p.status.derivePhases()
	return p.status.finish(ctx)
}

// validate sets the Valid condition and returns the compiled schedule.
func (p *pass) validate() (*schedule.Schedule, bool) {
	compiled, errs, err := p.c.specs.compile(p.ds)
	if len(errs) > 0 {
		p.status.setCondition("Valid", metav1.ConditionFalse, ReasonInvalidSchedule, withFix(ReasonInvalidSchedule, errs.ToAggregate().Error()))
		return nil, false
	}
	if err != nil {
		p.status.setCondition("Valid", metav1.ConditionFalse, ReasonInvalidSchedule, withFix(ReasonInvalidSchedule, err.Error()))
		return nil, false
	}
	p.status.setCondition("Valid", metav1.ConditionTrue, "Valid", "the schedule compiles")
	return compiled, true
}

// applyNow returns a rota.dev/apply-now value not handled yet ("" if none),
// and records it handled when this pass may act on it.
func (p *pass) applyNow() string {
	v := p.ds.Annotations[gpuv1.ApplyNowAnnotation]
	if v == "" || v == p.ds.Status.ApplyNowHandled {
		return ""
	}
	if p.gate.enforce {
		p.ds.Status.ApplyNowHandled = v
	}
	return v
}

// loadTargets lines the status targets up with the spec and runs the
// ownership step, then the eligibility step, on each.
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
		reason, msg, err := p.owners.check(ctx, p.ds, spec.WorkloadRef)
		if err != nil {
			return err
		}
		if reason == "" {
			res, err := p.eligibility.check(ctx, p.ds.Namespace, spec.WorkloadRef, t.interval)
			if err != nil {
				return err
			}
			t.wl, t.status.Observed, reason, msg = res.wl, res.observed, res.reason, res.msg
		}
		t.ineligibleReason, t.ineligibleMsg = reason, msg
		p.targets = append(p.targets, t)
	}
	p.status.targets = p.targets
	return nil
}

// finishSubmitting re-submits every step left Submitting. With the gate
// closed it only recognises mutations that already happened.
func (p *pass) finishSubmitting(ctx context.Context) error {
	for _, t := range p.targets {
		for i := range t.status.Steps {
			s := &t.status.Steps[i]
			if s.Phase != v1alpha1.StepSubmitting {
				continue
			}
			accepted, err := p.submit.submit(ctx, t, s, p.gate.enforce)
			if err != nil {
				return err
			}
			if accepted {
				p.wantRequeue(p.c.opts.ProgressPeriod)
			}
		}
	}
	return nil
}
