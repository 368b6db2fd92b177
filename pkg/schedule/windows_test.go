package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// TestEvaluateWindows covers window semantics one at a time, in UTC so the only
// calendar effects are the ones a case asks for.
func TestEvaluateWindows(t *testing.T) {
	u := func(s string) time.Time { return wall(t, time.UTC, s) }
	a, b := newTarget("a", Stopped), newTarget("b", Running)
	pinned := newTarget("p", Running)
	two := v1alpha1.Replicas(2)
	pinned.DefaultReplicas = &two
	consent := true
	aWithConsent := stopped("a")
	aWithConsent.AllowDowntime = &consent

	testCases := map[string]struct {
		ds              *v1alpha1.DeploySchedule
		from, to        string
		wantIntervals   []Interval
		wantTransitions []Transition
	}{
		"window longer than its period stays active without a gap": {
			ds:   newSchedule("UTC", []v1alpha1.ScheduleTarget{a}, recurring("hourly", 1, "0 * * * *", "90m", running("a"))),
			from: "2026-01-01 00:00", to: "2026-01-03 00:00",
			wantIntervals: []Interval{iv("a", u("2026-01-01 00:00"), u("2026-01-03 00:00"), Running, 0, false, "hourly")},
		},
		"a window on a minute cron lasting for centuries is cheap to evaluate": {
			ds:   newSchedule("UTC", []v1alpha1.ScheduleTarget{a}, recurring("forever", 1, "* * * * *", "2000000h", running("a"))),
			from: "2026-01-01 00:00", to: "2026-01-02 00:00",
			wantIntervals: []Interval{iv("a", u("2026-01-01 00:00"), u("2026-01-02 00:00"), Running, 0, false, "forever")},
		},
		"weekday window of 30h runs Monday 08:00 to Saturday 14:00": {
			ds:   newSchedule("UTC", []v1alpha1.ScheduleTarget{a}, recurring("long", 1, "0 8 * * 1-5", "30h", running("a"))),
			from: "2026-10-19 00:00", to: "2026-10-26 00:00",
			wantIntervals: []Interval{
				iv("a", u("2026-10-19 00:00"), u("2026-10-19 08:00"), Stopped, 0, false, SourceDefault),
				iv("a", u("2026-10-19 08:00"), u("2026-10-24 14:00"), Running, 0, false, "long"),
				iv("a", u("2026-10-24 14:00"), u("2026-10-26 00:00"), Stopped, 0, false, SourceDefault),
			},
			wantTransitions: []Transition{
				{At: u("2026-10-19 08:00"), Steps: []Step{start("a", 0)}},
				{At: u("2026-10-24 14:00"), Steps: []Step{stop("a")}},
			},
		},
		"one-shot crossing midnight over a recurring night window": {
			ds: newSchedule("UTC", []v1alpha1.ScheduleTarget{a},
				recurring("nightly", 10, "0 20 * * *", "8h", running("a")),
				oneShot("freeze", 20, u("2026-10-21 23:00"), u("2026-10-22 02:00"), stopped("a"))),
			from: "2026-10-21 12:00", to: "2026-10-22 12:00",
			wantIntervals: []Interval{
				iv("a", u("2026-10-21 12:00"), u("2026-10-21 20:00"), Stopped, 0, false, SourceDefault),
				iv("a", u("2026-10-21 20:00"), u("2026-10-21 23:00"), Running, 0, false, "nightly"),
				iv("a", u("2026-10-21 23:00"), u("2026-10-22 02:00"), Stopped, 0, false, "freeze"),
				iv("a", u("2026-10-22 02:00"), u("2026-10-22 04:00"), Running, 0, false, "nightly"),
				iv("a", u("2026-10-22 04:00"), u("2026-10-22 12:00"), Stopped, 0, false, SourceDefault),
			},
			wantTransitions: []Transition{
				{At: u("2026-10-21 20:00"), Steps: []Step{start("a", 0)}},
				{At: u("2026-10-21 23:00"), Steps: []Step{stop("a")}},
				{At: u("2026-10-22 02:00"), Steps: []Step{start("a", 0)}},
				{At: u("2026-10-22 04:00"), Steps: []Step{stop("a")}},
			},
		},
		"range starting inside a window: the state at from is not a transition": {
			ds:   newSchedule("UTC", []v1alpha1.ScheduleTarget{a}, recurring("day", 1, "0 8 * * *", "10h", running("a"))),
			from: "2026-10-19 12:00", to: "2026-10-19 20:00",
			wantIntervals: []Interval{
				iv("a", u("2026-10-19 12:00"), u("2026-10-19 18:00"), Running, 0, false, "day"),
				iv("a", u("2026-10-19 18:00"), u("2026-10-19 20:00"), Stopped, 0, false, SourceDefault),
			},
			wantTransitions: []Transition{{At: u("2026-10-19 18:00"), Steps: []Step{stop("a")}}},
		},
		"a new source or consent opens an interval but needs no step": {
			ds: newSchedule("UTC", []v1alpha1.ScheduleTarget{a},
				recurring("quiet", 1, "0 0 * * *", "2h", aWithConsent)),
			from: "2026-10-19 00:00", to: "2026-10-19 04:00",
			wantIntervals: []Interval{
				iv("a", u("2026-10-19 00:00"), u("2026-10-19 02:00"), Stopped, 0, true, "quiet"),
				iv("a", u("2026-10-19 02:00"), u("2026-10-19 04:00"), Stopped, 0, false, SourceDefault),
			},
		},
		"scales: unpinned to pinned counts as acquire, pinned down as release": {
			ds: newSchedule("UTC", []v1alpha1.ScheduleTarget{pinned, b},
				recurring("shift", 1, "0 8 * * *", "1h", withReplicas(running("p"), 1), withReplicas(running("b"), 3))),
			from: "2026-10-19 07:00", to: "2026-10-19 10:00",
			wantIntervals: []Interval{
				iv("b", u("2026-10-19 07:00"), u("2026-10-19 08:00"), Running, 0, false, SourceDefault),
				iv("p", u("2026-10-19 07:00"), u("2026-10-19 08:00"), Running, 2, false, SourceDefault),
				iv("b", u("2026-10-19 08:00"), u("2026-10-19 09:00"), Running, 3, false, "shift"),
				iv("p", u("2026-10-19 08:00"), u("2026-10-19 09:00"), Running, 1, false, "shift"),
				iv("b", u("2026-10-19 09:00"), u("2026-10-19 10:00"), Running, 0, false, SourceDefault),
				iv("p", u("2026-10-19 09:00"), u("2026-10-19 10:00"), Running, 2, false, SourceDefault),
			},
			wantTransitions: []Transition{
				{At: u("2026-10-19 08:00"), Steps: []Step{scale("p", 1), scale("b", 3)}},
				// Unpinning b has no known direction: an acquire, after p's scale-up.
				{At: u("2026-10-19 09:00"), Steps: []Step{scale("p", 2), scale("b", 0)}},
			},
		},
		"equal priority where overlap was not rejected: the later start wins": {
			ds: newSchedule("UTC", []v1alpha1.ScheduleTarget{a},
				recurring("day", 5, "0 8 * * *", "10h", running("a")),
				recurring("lunch", 5, "0 12 * * *", "1h", stopped("a"))),
			from: "2026-10-19 07:00", to: "2026-10-19 19:00",
			wantIntervals: []Interval{
				iv("a", u("2026-10-19 07:00"), u("2026-10-19 08:00"), Stopped, 0, false, SourceDefault),
				iv("a", u("2026-10-19 08:00"), u("2026-10-19 12:00"), Running, 0, false, "day"),
				iv("a", u("2026-10-19 12:00"), u("2026-10-19 13:00"), Stopped, 0, false, "lunch"),
				iv("a", u("2026-10-19 13:00"), u("2026-10-19 18:00"), Running, 0, false, "day"),
				iv("a", u("2026-10-19 18:00"), u("2026-10-19 19:00"), Stopped, 0, false, SourceDefault),
			},
			wantTransitions: []Transition{
				{At: u("2026-10-19 08:00"), Steps: []Step{start("a", 0)}},
				{At: u("2026-10-19 12:00"), Steps: []Step{stop("a")}},
				{At: u("2026-10-19 13:00"), Steps: []Step{start("a", 0)}},
				{At: u("2026-10-19 18:00"), Steps: []Step{stop("a")}},
			},
		},
		"equal priority and equal start: the name that sorts first wins": {
			ds: newSchedule("UTC", []v1alpha1.ScheduleTarget{a},
				recurring("zeta", 5, "0 8 * * *", "2h", running("a")),
				recurring("alpha", 5, "0 8 * * *", "1h", withReplicas(running("a"), 4))),
			from: "2026-10-19 08:00", to: "2026-10-19 11:00",
			wantIntervals: []Interval{
				iv("a", u("2026-10-19 08:00"), u("2026-10-19 09:00"), Running, 4, false, "alpha"),
				iv("a", u("2026-10-19 09:00"), u("2026-10-19 10:00"), Running, 0, false, "zeta"),
				iv("a", u("2026-10-19 10:00"), u("2026-10-19 11:00"), Stopped, 0, false, SourceDefault),
			},
			wantTransitions: []Transition{
				{At: u("2026-10-19 09:00"), Steps: []Step{scale("a", 0)}},
				{At: u("2026-10-19 10:00"), Steps: []Step{stop("a")}},
			},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			got := mustEvaluate(t, tc.ds, u(tc.from), u(tc.to))
			if diff := cmp.Diff(tc.wantIntervals, got.Intervals); diff != "" {
				t.Errorf("intervals (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTransitions, got.Transitions); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvaluateRejectsEmptyRange(t *testing.T) {
	s := mustCompile(t, newSchedule("UTC", []v1alpha1.ScheduleTarget{newTarget("a", Running)}))
	at := utc(t, "2026-10-19T00:00:00Z")
	for name, to := range map[string]time.Time{"to equals from": at, "to before from": at.Add(-time.Hour)} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Evaluate(at, to); err == nil {
				t.Errorf("Evaluate(%s, %s) succeeded, want an error", at, to)
			}
		})
	}
}
