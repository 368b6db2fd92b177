package schedule

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// FuzzEvaluate builds random schedules (zones with and without daylight saving,
// self-overlapping windows, equal priorities) and checks that evaluation never
// panics, that intervals tile [from, to) per target, that each interval's intent
// is what docs/schedule.md says at its instants, that transitions match the intervals, and
// that a sub-range gives the same answer as the whole range.
//
//	go test ./pkg/schedule -run '^$' -fuzz FuzzEvaluate -fuzztime 30s
func FuzzEvaluate(f *testing.F) {
	for _, seed := range []string{
		"", "\x00", "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a",
		"\x01\x01\x03\x00\x00\x01\x00\x02\x01\x01\x04\x01\x00\x02\x00\x05\x06\x07\x08\x09\x10\x11",
		"\x02\x02\x04\x01\x01\x02\x02\x00\x03\x00\x02\x00\x01\x02\x03\x04\x05\x06\x07\x08\x30\x40\x50",
		"\x03\x01\x05\x00\x00\x00\x04\x04\x04\x04\x04\x06\x01\x01\x02\x03\x01\x01\x01\x02\x02\x02\x20",
		"\x05\x02\x03\x01\x02\x03\x01\x01\x01\x02\x00\x00\x01\x01\x01\x01\x03\x02\x01\x00\xff\xfe\xfd",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ds, from, to := randomSchedule(&byteSource{data: data})
		s, err := Compile(ds)
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
		tl, err := s.Evaluate(from, to)
		if err != nil {
			t.Fatalf("Evaluate: %v", err)
		}
		perTarget := checkTiling(t, s, tl, from, to)
		checkIntents(t, s, perTarget)
		checkTransitions(t, tl, perTarget, from, to)

		mid := from.Add(to.Sub(from) / 3).Truncate(time.Minute)
		if !mid.After(from) {
			return
		}
		sub, err := s.Evaluate(mid, to)
		if err != nil {
			t.Fatalf("Evaluate(mid): %v", err)
		}
		if diff := cmp.Diff(clip(tl.Intervals, mid), sub.Intervals); diff != "" {
			t.Errorf("evaluating from %s differs from the clipped full range (-full +sub):\n%s", mid, diff)
		}
	})
}

// checkTiling returns each target's intervals after checking they tile [from, to).
func checkTiling(t *testing.T, s *Schedule, tl *Timeline, from, to time.Time) map[string][]Interval {
	t.Helper()
	perTarget := map[string][]Interval{}
	for i, iv := range tl.Intervals {
		if i > 0 && iv.Start.Before(tl.Intervals[i-1].Start) {
			t.Fatalf("intervals not sorted by start at %d", i)
		}
		perTarget[iv.Target] = append(perTarget[iv.Target], iv)
	}
	for _, tg := range s.targets {
		ivs := perTarget[tg.name]
		if len(ivs) == 0 {
			t.Fatalf("target %s has no intervals", tg.name)
		}
		if !ivs[0].Start.Equal(from) || !ivs[len(ivs)-1].End.Equal(to) {
			t.Fatalf("target %s: intervals cover [%s, %s), want [%s, %s)", tg.name, ivs[0].Start, ivs[len(ivs)-1].End, from, to)
		}
		for k, iv := range ivs {
			if !iv.Start.Before(iv.End) {
				t.Fatalf("target %s: empty interval %+v", tg.name, iv)
			}
			if k > 0 && !ivs[k-1].End.Equal(iv.Start) {
				t.Fatalf("target %s: gap or overlap between %+v and %+v", tg.name, ivs[k-1], iv)
			}
			if k > 0 && ivs[k-1].Intent == iv.Intent {
				t.Fatalf("target %s: neighbouring intervals with equal intent %+v", tg.name, iv.Intent)
			}
		}
	}
	return perTarget
}

// checkIntents compares each interval's intent, at its first and last instants
// and its middle, with a direct reading of docs/schedule.md.
func checkIntents(t *testing.T, s *Schedule, perTarget map[string][]Interval) {
	t.Helper()
	for ti := range s.targets {
		for _, iv := range perTarget[s.targets[ti].name] {
			for _, at := range []time.Time{iv.Start, iv.Start.Add(iv.End.Sub(iv.Start) / 2), iv.End.Add(-time.Nanosecond)} {
				if want := specIntent(s, ti, at); want != iv.Intent {
					t.Fatalf("target %s at %s: interval says %+v, the rules say %+v", iv.Target, at, iv.Intent, want)
				}
			}
		}
	}
}

// specIntent reads docs/schedule.md literally: a recurring window is active at t when some
// fire time s has s <= t < s+duration; highest priority wins, then the later
// start, then the name that sorts first.
func specIntent(s *Schedule, ti int, at time.Time) Intent {
	tg := &s.targets[ti]
	best, bestPriority, bestStart, bestName := -1, int32(0), time.Time{}, ""
	for i, ws := range tg.windows {
		w := &s.windows[ws.window]
		var start time.Time
		active := false
		if w.cron == nil {
			active, start = !at.Before(w.from) && at.Before(w.until), w.from
		} else {
			for fire := range w.cron.FireTimes(s.loc, at.Add(-w.duration), at.Add(time.Nanosecond)) {
				active, start = true, fire
			}
		}
		if !active {
			continue
		}
		better := best < 0 || w.priority > bestPriority ||
			(w.priority == bestPriority && (start.After(bestStart) || (start.Equal(bestStart) && w.name < bestName)))
		if better {
			best, bestPriority, bestStart, bestName = i, w.priority, start, w.name
		}
	}
	if best < 0 {
		return tg.defaultIntent
	}
	return tg.windows[best].intent
}

func checkTransitions(t *testing.T, tl *Timeline, perTarget map[string][]Interval, from, to time.Time) {
	t.Helper()
	changed := map[time.Time]map[string]bool{}
	for target, ivs := range perTarget {
		for k := 1; k < len(ivs); k++ {
			prev, next := ivs[k-1].Intent, ivs[k].Intent
			if prev.State != next.State || prev.Replicas != next.Replicas {
				at := ivs[k].Start.UTC()
				if changed[at] == nil {
					changed[at] = map[string]bool{}
				}
				changed[at][target] = true
			}
		}
	}
	if len(tl.Transitions) != len(changed) {
		t.Fatalf("%d transitions, but (state, replicas) changes at %d instants", len(tl.Transitions), len(changed))
	}
	for i, tr := range tl.Transitions {
		if !tr.At.After(from) || !tr.At.Before(to) || (i > 0 && !tr.At.After(tl.Transitions[i-1].At)) {
			t.Fatalf("transition %d at %s out of order or outside (%s, %s)", i, tr.At, from, to)
		}
		got := map[string]bool{}
		for _, st := range tr.Steps {
			got[st.Target] = true
		}
		if diff := cmp.Diff(changed[tr.At.UTC()], got); diff != "" {
			t.Fatalf("transition at %s steps the wrong targets (-changed +stepped):\n%s", tr.At, diff)
		}
	}
}

func clip(ivs []Interval, from time.Time) []Interval {
	var out []Interval
	for _, iv := range ivs {
		if !iv.End.After(from) {
			continue
		}
		if iv.Start.Before(from) {
			iv.Start = from
		}
		out = append(out, iv)
	}
	// Clipped starts coincide at from: restore the (start, target) order.
	slices.SortStableFunc(out, func(a, b Interval) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.Target, b.Target)
	})
	return out
}

// byteSource hands out fuzz bytes as small choices; exhausted, it answers 0.
type byteSource struct{ data []byte }

func (b *byteSource) pick(n int) int {
	if len(b.data) == 0 {
		return 0
	}
	v := int(b.data[0]) % n
	b.data = b.data[1:]
	return v
}

func choose[T any](b *byteSource, options ...T) T { return options[b.pick(len(options))] }

func randomSchedule(b *byteSource) (*v1alpha1.DeploySchedule, time.Time, time.Time) {
	zone := choose(b, "UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Ho_Chi_Minh", "America/Santiago")
	var targets []v1alpha1.ScheduleTarget
	for i := range 1 + b.pick(3) {
		tg := newTarget(fmt.Sprintf("t%d", i), choose(b, Running, Stopped))
		if n := b.pick(4); n > 0 && tg.DefaultState == Running {
			r := v1alpha1.Replicas(n)
			tg.DefaultReplicas = &r
		}
		tg.DefaultAllowDowntime = b.pick(2) == 1
		targets = append(targets, tg)
	}
	// Around the 2026 transitions of the zones above.
	base := choose(b, "2026-03-07T00:00:00Z", "2026-03-28T00:00:00Z", "2026-04-03T00:00:00Z",
		"2026-09-05T00:00:00Z", "2026-10-03T00:00:00Z", "2026-10-24T00:00:00Z", "2026-10-31T00:00:00Z")
	start, _ := time.Parse(time.RFC3339, base)
	var windows []v1alpha1.ScheduleWindow
	for i := range b.pick(6) {
		var states []v1alpha1.TargetState
		for _, tg := range targets {
			if b.pick(3) == 0 && len(states) > 0 {
				continue
			}
			st := choose(b, running(tg.Name), stopped(tg.Name))
			if n := b.pick(4); n > 0 && st.DesiredState == Running {
				st = withReplicas(st, int32(n))
			}
			if n := b.pick(3); n > 0 {
				consent := n == 1
				st.AllowDowntime = &consent
			}
			states = append(states, st)
		}
		name, priority := fmt.Sprintf("w%d", i), int32(b.pick(3))
		if b.pick(3) == 0 {
			from := start.Add(time.Duration(b.pick(256)) * 37 * time.Minute)
			windows = append(windows, oneShot(name, priority, from, from.Add(time.Duration(1+b.pick(256))*13*time.Minute), states...))
			continue
		}
		cron := fmt.Sprintf("%s %s %s %s %s",
			choose(b, "0", "30", "*/20", "15,45", "*"), choose(b, "*", "2", "1-3", "8", "*/6", "0,12", "23"),
			choose(b, "*", "1", "*/2", "25-31"), choose(b, "*", "3", "10-11", "4,9"), choose(b, "*", "1-5", "0", "6"))
		duration := choose(b, "1m", "30m", "1h", "90m", "10h", "25h", "49h")
		windows = append(windows, recurring(name, priority, cron, duration, states...))
	}
	from := start.Add(time.Duration(b.pick(256)) * 17 * time.Minute)
	to := from.Add(time.Hour + time.Duration(b.pick(64))*3*time.Hour)
	return newSchedule(zone, targets, windows...), from, to
}
