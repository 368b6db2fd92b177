package controller

import (
	"context"
	"fmt"

	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// planned is one step of the schedule's current transition with its target.
type planned struct {
	t *target
	s *v1alpha1.TransitionStep
}

// execute drives the transition: preflight before the first release, then
// every release step, then the acquire steps one at a time (ReleaseFirst), or
// the other way round for AcquireFirst.
func (p *pass) execute(ctx context.Context) error {
	var release, acquire []planned
	for _, t := range p.targets {
		for i := range t.status.Steps {
			s := &t.status.Steps[i]
			if s.Group == v1alpha1.StepGroupRelease {
				release = append(release, planned{t, s})
			} else {
				acquire = append(acquire, planned{t, s})
			}
		}
	}
	if len(release)+len(acquire) == 0 {
		return nil
	}
	if allPlanned(release) && allPlanned(acquire) && (anyPhase(release, v1alpha1.StepPlanned) || anyPhase(acquire, v1alpha1.StepPlanned)) {
		ok, err := p.preflight(ctx, release, acquire)
		if err != nil || !ok {
			return err
		}
	}
	first, second := release, acquire
	firstDone := p.driveRelease
	secondDone := p.driveAcquire
	if p.ds.Spec.TransitionOrder == v1alpha1.TransitionOrderAcquireFirst {
		first, second = acquire, release
		firstDone, secondDone = p.driveAcquire, p.driveRelease
	}
	done, failed, err := firstDone(ctx, first)
	if err != nil || !done {
		return err
	}
	if failed != "" {
		for _, pl := range second {
			if pl.s.Phase == v1alpha1.StepPlanned {
				p.failStep(pl.t, pl.s, ReasonTransitionAborted, "not run: "+failed)
			}
		}
		return nil
	}
	_, _, err = secondDone(ctx, second)
	return err
}

// driveRelease submits every planned release step and checks the submitted
// ones. done: no release step is in flight; failed names a failed one.
func (p *pass) driveRelease(ctx context.Context, steps []planned) (done bool, failed string, err error) {
	done = true
	for _, pl := range steps {
		t, s := pl.t, pl.s
		if s.Phase == v1alpha1.StepPlanned {
			if t.ineligibleReason != "" {
				p.failStep(t, s, t.ineligibleReason, t.ineligibleMsg)
			} else if reason, msg := p.aliasGuard(ctx, t, s); reason != "" {
				p.failStep(t, s, reason, msg)
			} else if err := p.submit(ctx, t, s, true); err != nil {
				return false, "", err
			}
		}
		if s.Phase == v1alpha1.StepAccepted {
			if err := p.checkReleased(ctx, t, s); err != nil {
				return false, "", err
			}
		}
		switch s.Phase {
		case v1alpha1.StepFailed:
			if failed == "" && s.Reason != "Superseded" {
				failed = fmt.Sprintf("release of target %s failed (%s)", t.spec.Name, s.Reason)
			}
		case v1alpha1.StepSucceeded:
		default:
			done = false
		}
	}
	if !done {
		p.wantRequeue(p.c.opts.ProgressPeriod)
	}
	return done, failed, nil
}

// driveAcquire runs acquire steps one at a time, so that each capacity
// preview sees the devices the previous one took.
func (p *pass) driveAcquire(ctx context.Context, steps []planned) (done bool, failed string, err error) {
	for _, pl := range steps {
		t, s := pl.t, pl.s
		if s.Phase == v1alpha1.StepPlanned {
			if t.ineligibleReason != "" {
				p.failStep(t, s, t.ineligibleReason, t.ineligibleMsg)
				failed = fmt.Sprintf("acquire of target %s failed (%s)", t.spec.Name, s.Reason)
				continue
			}
			fits, msg, err := p.capacityPreview(ctx, t, s)
			if err != nil {
				return false, "", err
			}
			if !fits {
				p.capacityWait(t, s, msg)
				return false, "", nil
			}
			if err := p.submit(ctx, t, s, true); err != nil {
				return false, "", err
			}
		}
		if s.Phase == v1alpha1.StepAccepted {
			if err := p.checkAcquired(ctx, t, s); err != nil {
				return false, "", err
			}
		}
		switch s.Phase {
		case v1alpha1.StepFailed:
			if failed == "" && s.Reason != "Superseded" {
				failed = fmt.Sprintf("acquire of target %s failed (%s)", t.spec.Name, s.Reason)
			}
		case v1alpha1.StepSucceeded:
		default:
			p.wantRequeue(p.c.opts.ProgressPeriod)
			return false, failed, nil
		}
	}
	return true, failed, nil
}

// capacityWait keeps an acquire step waiting for GPUs, or fails it once the
// capacity timeout after the boundary has passed (or the interval ends, see
// openInterval). The released targets are not restarted.
func (p *pass) capacityWait(t *target, s *v1alpha1.TransitionStep, msg string) {
	timeout := p.timeout(p.ds.Spec.Timeouts, func(t *v1alpha1.ScheduleTimeouts) *v1alpha1.Duration { return t.Capacity }, DefaultCapacityTimeout)
	deadline := t.interval.Start.Add(timeout)
	if !p.now.Before(deadline) {
		p.failStep(t, s, ReasonCapacityUnavailable, fmt.Sprintf("still no room %s after the boundary: %s", timeout, msg))
		return
	}
	s.Reason, s.Message = ReasonCapacityWait, truncate(msg, 1024)
	p.wantRequeue(p.c.opts.ProgressPeriod)
	p.wantRequeue(deadline.Sub(p.now))
}

func allPlanned(steps []planned) bool {
	for _, pl := range steps {
		if pl.s.Phase != v1alpha1.StepPlanned && pl.s.Phase != v1alpha1.StepSucceeded && pl.s.Phase != v1alpha1.StepFailed {
			return false
		}
		if pl.s.Phase != v1alpha1.StepPlanned && pl.s.Reason != "Superseded" {
			return false
		}
	}
	return true
}

func anyPhase(steps []planned, phase v1alpha1.StepPhase) bool {
	for _, pl := range steps {
		if pl.s.Phase == phase {
			return true
		}
	}
	return false
}

// replicasOf is a step's target scale.
func replicasOf(s *v1alpha1.TransitionStep) int32 { return ptr.Deref(s.Replicas, 0) }
