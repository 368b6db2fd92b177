package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

const (
	Running = v1alpha1.StateRunning
	Stopped = v1alpha1.StateStopped
)

// TestEvaluateWeekSwap is the week-swap acceptance scenario
// (docs/design.md#scenario-week-swap): the docs/schedule.md schedule over the
// week of Mon 2026-10-19, through Monday 08:00 of the next week.
func TestEvaluateWeekSwap(t *testing.T) {
	hcm := mustLoad(t, "Asia/Ho_Chi_Minh")
	day := func(d int, hm string) time.Time {
		return wall(t, hcm, time.Date(2026, 10, 19+d, 0, 0, 0, 0, time.UTC).Format("2006-01-02")+" "+hm)
	}
	// Both targets change together in this schedule; llama70b consents to downtime
	// by default and maint-wed repeats it, qwen32b never does.
	both := func(from, to time.Time, llama, qwen v1alpha1.DesiredState, source string) []Interval {
		return []Interval{
			iv("llama70b", from, to, llama, 0, true, source),
			iv("qwen32b", from, to, qwen, 0, false, source),
		}
	}
	off := func(from, to time.Time) []Interval { return both(from, to, Stopped, Running, SourceDefault) }
	business := func(from, to time.Time) []Interval { return both(from, to, Running, Stopped, "business-hours") }
	morning := []Step{stop("qwen32b"), start("llama70b", 0)}
	evening := []Step{stop("llama70b"), start("qwen32b", 0)}

	var wantIntervals []Interval
	for _, ivs := range [][]Interval{
		off(day(0, "00:00"), day(0, "08:00")),
		business(day(0, "08:00"), day(0, "18:00")),
		off(day(0, "18:00"), day(1, "08:00")),
		business(day(1, "08:00"), day(1, "18:00")),
		off(day(1, "18:00"), day(2, "08:00")),
		business(day(2, "08:00"), day(2, "13:00")),
		both(day(2, "13:00"), day(2, "15:00"), Stopped, Running, "maint-wed"),
		business(day(2, "15:00"), day(2, "18:00")),
		off(day(2, "18:00"), day(3, "08:00")),
		business(day(3, "08:00"), day(3, "18:00")),
		off(day(3, "18:00"), day(4, "08:00")),
		business(day(4, "08:00"), day(4, "18:00")),
		off(day(4, "18:00"), day(7, "08:00")), // Friday 18:00 to Monday 08:00 on defaults
	} {
		wantIntervals = append(wantIntervals, ivs...)
	}
	wantTransitions := []Transition{
		{At: day(0, "08:00"), Steps: morning}, {At: day(0, "18:00"), Steps: evening},
		{At: day(1, "08:00"), Steps: morning}, {At: day(1, "18:00"), Steps: evening},
		{At: day(2, "08:00"), Steps: morning},
		{At: day(2, "13:00"), Steps: evening}, // maint-wed overrides business-hours
		{At: day(2, "15:00"), Steps: morning}, // and hands back
		{At: day(2, "18:00"), Steps: evening},
		{At: day(3, "08:00"), Steps: morning}, {At: day(3, "18:00"), Steps: evening},
		{At: day(4, "08:00"), Steps: morning}, {At: day(4, "18:00"), Steps: evening},
	}

	got := mustEvaluate(t, loadExample(t, "deployschedule-week.yaml"), day(0, "00:00"), day(7, "08:00"))
	if diff := cmp.Diff(wantIntervals, got.Intervals); diff != "" {
		t.Errorf("intervals (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantTransitions, got.Transitions); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

// TestEvaluateMultiReplica is the multi-replica acceptance scenario
// (docs/design.md#scenario-multi-replica): llama70b scales 1→2 at
// 08:00 and 2→1 at 18:00, never to zero; qwen-8gpu uses the freed node outside
// business hours.
func TestEvaluateMultiReplica(t *testing.T) {
	hcm := mustLoad(t, "Asia/Ho_Chi_Minh")
	ds := loadExample(t, "deployschedule-multireplica.yaml")
	from, to := wall(t, hcm, "2026-10-19 00:00"), wall(t, hcm, "2026-10-20 00:00")
	at8, at18 := wall(t, hcm, "2026-10-19 08:00"), wall(t, hcm, "2026-10-19 18:00")

	testCases := map[string]struct {
		order           v1alpha1.TransitionOrder
		wantTransitions []Transition
	}{
		"release first by default: scale down before start, stop before scale up": {
			wantTransitions: []Transition{
				{At: at8, Steps: []Step{stop("qwen-8gpu"), scale("llama70b", 2)}},
				{At: at18, Steps: []Step{scale("llama70b", 1), start("qwen-8gpu", 0)}},
			},
		},
		"acquire first reverses the groups": {
			order: v1alpha1.TransitionOrderAcquireFirst,
			wantTransitions: []Transition{
				{At: at8, Steps: []Step{scale("llama70b", 2), stop("qwen-8gpu")}},
				{At: at18, Steps: []Step{start("qwen-8gpu", 0), scale("llama70b", 1)}},
			},
		},
	}
	wantIntervals := []Interval{
		iv("llama70b", from, at8, Running, 1, false, SourceDefault),
		iv("qwen-8gpu", from, at8, Running, 0, false, SourceDefault),
		iv("llama70b", at8, at18, Running, 2, false, "business-hours"),
		iv("qwen-8gpu", at8, at18, Stopped, 0, false, "business-hours"),
		iv("llama70b", at18, to, Running, 1, false, SourceDefault),
		iv("qwen-8gpu", at18, to, Running, 0, false, SourceDefault),
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			ds := ds.DeepCopy()
			ds.Spec.TransitionOrder = tc.order
			got := mustEvaluate(t, ds, from, to)
			if diff := cmp.Diff(wantIntervals, got.Intervals); diff != "" {
				t.Errorf("intervals (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTransitions, got.Transitions); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
		})
	}
}
