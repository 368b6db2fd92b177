package controller

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// horizon is how far ahead a pass evaluates to find the next boundary; a pass
// runs at least every PassPeriod, so a boundary further away is found later.
const horizon = 25 * time.Hour

// current is a target's intent interval at now, with a start that stays the
// same from pass to pass.
type current struct {
	schedule.Interval
}

// currentIntervals evaluates s around now. For each target it returns the
// interval containing now and the earliest boundary after now (zero if none
// within the horizon). The start of an interval longer than the evaluated
// past is taken from the previous status when the intent is unchanged, so
// idempotency keys do not drift.
func currentIntervals(s *schedule.Schedule, ds *v1alpha1.DeploySchedule, now time.Time, lookback time.Duration) (map[string]current, time.Time, error) {
	prev := map[string]*v1alpha1.TargetStatus{}
	for i := range ds.Status.Targets {
		prev[ds.Status.Targets[i].Name] = &ds.Status.Targets[i]
	}
	// Evaluate from the earliest recorded interval start when it is recent, so
	// the same intervals are found unclipped; metav1.Time keeps whole seconds.
	floor := now.Add(-lookback).Truncate(time.Second)
	from := earliestRecorded(ds, floor, now)
	tl, err := s.Evaluate(from, now.Add(horizon))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("evaluate schedule: %w", err)
	}
	out := map[string]current{}
	var next time.Time
	for _, iv := range tl.Intervals {
		if iv.Start.After(now) || !iv.End.After(now) {
			continue
		}
		if iv.End.Before(now.Add(horizon)) && (next.IsZero() || iv.End.Before(next)) {
			next = iv.End
		}
		if iv.Start.Equal(from) {
			if p := prev[iv.Target]; p != nil && p.Desired != nil && p.Desired.IntervalStart != nil &&
				!p.Desired.IntervalStart.After(from) && intentOf(p.Desired) == iv.Intent {
				iv.Start = p.Desired.IntervalStart.Time
			}
		}
		out[iv.Target] = current{Interval: iv}
	}
	return out, next, nil
}

// earliestRecorded returns the earliest recorded interval start when every
// target has one in [floor, now], else floor.
func earliestRecorded(ds *v1alpha1.DeploySchedule, floor, now time.Time) time.Time {
	best := time.Time{}
	for _, t := range ds.Status.Targets {
		if t.Desired == nil || t.Desired.IntervalStart == nil {
			return floor
		}
		st := t.Desired.IntervalStart.Time
		if st.Before(floor) || st.After(now) {
			return floor
		}
		if best.IsZero() || st.Before(best) {
			best = st
		}
	}
	if best.IsZero() {
		return floor
	}
	return best
}

// intentOf converts a status intent back to the evaluator's Intent.
func intentOf(t *v1alpha1.TargetIntent) schedule.Intent {
	return schedule.Intent{State: t.State, Replicas: ptr.Deref(t.Replicas, 0), AllowDowntime: t.AllowDowntime, Source: t.Source}
}

// statusIntent converts an interval to the status form.
func statusIntent(iv schedule.Interval) *v1alpha1.TargetIntent {
	out := &v1alpha1.TargetIntent{
		State: iv.State, AllowDowntime: iv.AllowDowntime, Source: iv.Source,
		IntervalStart: ptr.To(metav1.NewTime(iv.Start)),
	}
	if iv.Replicas != 0 {
		out.Replicas = ptr.To(iv.Replicas)
	}
	return out
}
