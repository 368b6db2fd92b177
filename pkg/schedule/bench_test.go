package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// benchmarkCrons mix business hours, shifts, short frequent windows, a window
// longer than its period and rare ones.
var benchmarkCrons = []struct{ cron, duration string }{
	{"0 8 * * 1-5", "10h"}, {"0 18 * * 1-5", "14h"}, {"0 0 * * 6", "48h"}, {"0 */2 * * *", "30m"},
	{"30 12 * * *", "1h"}, {"0 2 1 * *", "4h"}, {"*/15 9-17 * * 1-5", "5m"}, {"0 * * * *", "90m"},
	{"0 22 * * 0-4", "9h"}, {"0 6 * 3-10 *", "3h"},
}

// bigSchedule has 10 targets and 20 windows (16 recurring, 4 one-shot), each
// window setting a state for 3 targets.
func bigSchedule(b testing.TB, zone string, variant int) *v1alpha1.DeploySchedule {
	var targets []v1alpha1.ScheduleTarget
	for i := range 10 {
		targets = append(targets, newTarget(fmt.Sprintf("model-%d", i), choose(&byteSource{data: []byte{byte(i + variant)}}, Running, Stopped)))
	}
	var windows []v1alpha1.ScheduleWindow
	for i := range 20 {
		var states []v1alpha1.TargetState
		for k := range 3 {
			name := targets[(i+k*3+variant)%10].Name
			if k == 1 {
				states = append(states, stopped(name))
			} else {
				states = append(states, withReplicas(running(name), int32(1+(i+k)%3)))
			}
		}
		name := fmt.Sprintf("window-%d", i)
		if i%5 == 4 {
			from := wall(b, time.UTC, "2026-01-05 10:00").Add(time.Duration(i*17+variant) * 24 * time.Hour)
			windows = append(windows, oneShot(name, int32(100+i), from, from.Add(36*time.Hour), states...))
			continue
		}
		c := benchmarkCrons[(i+variant)%len(benchmarkCrons)]
		windows = append(windows, recurring(name, int32(i), c.cron, c.duration, states...))
	}
	return newSchedule(zone, targets, windows...)
}

// BenchmarkEvaluateYear evaluates a year of a 10-target, 20-window schedule in a
// zone with daylight saving.
//
//	go test ./pkg/schedule -run '^$' -bench . -benchmem
func BenchmarkEvaluateYear(b *testing.B) {
	s := mustCompile(b, bigSchedule(b, "Europe/Berlin", 0))
	from, to := utc(b, "2026-01-01T00:00:00Z"), utc(b, "2027-01-01T00:00:00Z")
	var tl *Timeline
	for b.Loop() {
		var err error
		if tl, err = s.Evaluate(from, to); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tl.Intervals)), "intervals")
	b.ReportMetric(float64(len(tl.Transitions)), "transitions")
}

// BenchmarkPass2000Schedules is one controller pass over 2,000 schedules: each is
// compiled and evaluated over the next 24 hours, which yields its current intent
// and its next boundary. The pass period is 30 s.
func BenchmarkPass2000Schedules(b *testing.B) {
	zones := []string{"Asia/Ho_Chi_Minh", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"}
	var schedules []*v1alpha1.DeploySchedule
	for i := range 2000 {
		ds := bigSchedule(b, zones[i%len(zones)], i)
		// Most real schedules are small: keep 2 targets and 3 windows in 4 of 5.
		if i%5 != 0 {
			ds = smallSchedule(zones[i%len(zones)], i)
		}
		schedules = append(schedules, ds)
	}
	now := utc(b, "2026-10-21T05:59:30Z")
	for b.Loop() {
		for _, ds := range schedules {
			s, err := Compile(ds)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Evaluate(now, now.Add(24*time.Hour)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// smallSchedule is the docs/schedule.md shape: a day/night swap with a maintenance window.
func smallSchedule(zone string, variant int) *v1alpha1.DeploySchedule {
	day, night := newTarget("day", Stopped), newTarget("night", Running)
	hour := 6 + variant%6
	maint := time.Date(2026, 10, 21, 13, 0, 0, 0, time.UTC).Add(time.Duration(variant%48) * time.Hour)
	return newSchedule(zone, []v1alpha1.ScheduleTarget{day, night},
		recurring("business-hours", 10, fmt.Sprintf("0 %d * * 1-5", hour), "10h", running("day"), stopped("night")),
		recurring("lunch", 20, "0 12 * * *", "1h", withReplicas(running("night"), 1)),
		oneShot("maint", 100, maint, maint.Add(2*time.Hour), stopped("day"), running("night")))
}
