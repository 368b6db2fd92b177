package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// This file is the second half of the pass: it drives the transition
// (docs/schedule.md, "Executing a transition") by calling the preflight,
// release, acquire and convergence steps in order.

// transition runs preflight before the first release, then every release
// step, then the acquire steps one at a time (ReleaseFirst), or the two
// groups the other way round for AcquireFirst.
func (p *pass) transition(ctx context.Context) error {
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
		ok, err := p.preflight.check(ctx, release, acquire)
		if err != nil || !ok {
			return err
		}
	}
	first, second := release, acquire
	firstDone, secondDone := p.driveRelease, p.driveAcquire
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
				p.out.fail(pl.s, ReasonTransitionAborted, "not run: "+failed)
			}
		}
		return nil
	}
	_, _, err = secondDone(ctx, second)
	return err
}

// driveRelease starts every planned release step (release step) and checks
// the accepted ones (convergence step). done: no release step is in flight;
// failed names a failed one.
func (p *pass) driveRelease(ctx context.Context, steps []planned) (done bool, failed string, err error) {
	done = true
	for _, pl := range steps {
		t, s := pl.t, pl.s
		if s.Phase == v1alpha1.StepPlanned {
			if t.ineligibleReason != "" {
				p.out.fail(s, t.ineligibleReason, t.ineligibleMsg)
			} else if accepted, err := p.release.start(ctx, t, s); err != nil {
				return false, "", err
			} else if accepted {
				p.wantRequeue(p.c.opts.ProgressPeriod)
			}
		}
		if s.Phase == v1alpha1.StepAccepted {
			e, err := p.converge.released(ctx, t, s)
			if err != nil {
				return false, "", err
			}
			if e != nil {
				p.status.event(*e)
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

// driveAcquire runs acquire steps one at a time (acquire step, then
// convergence step), so that each capacity preview sees the devices the
// previous one took.
func (p *pass) driveAcquire(ctx context.Context, steps []planned) (done bool, failed string, err error) {
	for _, pl := range steps {
		t, s := pl.t, pl.s
		if s.Phase == v1alpha1.StepPlanned {
			if t.ineligibleReason != "" {
				p.out.fail(s, t.ineligibleReason, t.ineligibleMsg)
				failed = fmt.Sprintf("acquire of target %s failed (%s)", t.spec.Name, s.Reason)
				continue
			}
			parked, recheck, err := p.acquire.start(ctx, t, s)
			if err != nil {
				return false, "", err
			}
			if recheck > 0 {
				p.wantRequeue(recheck)
			}
			if parked {
				return false, "", nil
			}
		}
		if s.Phase == v1alpha1.StepAccepted {
			if err := p.converge.acquired(ctx, t, s); err != nil {
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

// wantRequeue asks for the next pass within d at the latest.
func (p *pass) wantRequeue(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if d < p.requeue {
		p.requeue = d
	}
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
