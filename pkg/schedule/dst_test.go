package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// TestEvaluateDST checks docs/schedule.md's daylight-saving rules in three zones: a fire
// time in a spring-forward gap fires at the first instant after the gap; an
// ambiguous wall time fires once, at its first occurrence; duration is elapsed
// time. Expected instants are written in UTC with the wall clock beside them.
func TestEvaluateDST(t *testing.T) {
	testCases := map[string]struct {
		zone, cron, duration string
		from, to             string
		// wantActive are the [start, end) pairs where the window is active.
		wantActive [][2]string
	}{
		"New York spring forward: 02:30 does not exist, fires at 03:00 EDT": {
			zone: "America/New_York", cron: "30 2 * * *", duration: "1h",
			from: "2026-03-07T05:00:00Z", to: "2026-03-10T04:00:00Z",
			wantActive: [][2]string{
				{"2026-03-07T07:30:00Z", "2026-03-07T08:30:00Z"}, // 02:30-03:30 EST
				{"2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}, // 03:00-04:00 EDT
				{"2026-03-09T06:30:00Z", "2026-03-09T07:30:00Z"}, // 02:30-03:30 EDT
			},
		},
		"New York spring forward: duration is elapsed, 01:00 EST + 2h ends 04:00 EDT": {
			zone: "America/New_York", cron: "0 1 8 3 *", duration: "2h",
			from: "2026-03-08T05:00:00Z", to: "2026-03-09T04:00:00Z",
			wantActive: [][2]string{{"2026-03-08T06:00:00Z", "2026-03-08T08:00:00Z"}},
		},
		"New York spring forward: every reading inside the gap fires once, at its end": {
			zone: "America/New_York", cron: "*/15 2 * * *", duration: "10m",
			from: "2026-03-08T05:00:00Z", to: "2026-03-08T16:00:00Z",
			wantActive: [][2]string{{"2026-03-08T07:00:00Z", "2026-03-08T07:10:00Z"}},
		},
		"New York fall back: 01:30 happens twice and fires once, in EDT": {
			zone: "America/New_York", cron: "30 1 * * *", duration: "1h",
			from: "2026-10-31T04:00:00Z", to: "2026-11-03T05:00:00Z",
			wantActive: [][2]string{
				{"2026-10-31T05:30:00Z", "2026-10-31T06:30:00Z"}, // 01:30-02:30 EDT
				{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"}, // 01:30 EDT-01:30 EST
				{"2026-11-02T06:30:00Z", "2026-11-02T07:30:00Z"}, // 01:30-02:30 EST
			},
		},
		"Berlin spring forward: 02:30 fires at 03:00 CEST": {
			zone: "Europe/Berlin", cron: "30 2 * * *", duration: "30m",
			from: "2026-03-28T23:00:00Z", to: "2026-03-29T22:00:00Z",
			wantActive: [][2]string{{"2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"}},
		},
		"Berlin fall back: 02:30 fires once, in CEST": {
			zone: "Europe/Berlin", cron: "30 2 * * *", duration: "30m",
			from: "2026-10-24T22:00:00Z", to: "2026-10-25T23:00:00Z",
			wantActive: [][2]string{{"2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z"}},
		},
		"Berlin fall back: an hourly window skips the repeated hour": {
			zone: "Europe/Berlin", cron: "0 * * * *", duration: "30m",
			from: "2026-10-24T23:00:00Z", to: "2026-10-25T03:00:00Z",
			wantActive: [][2]string{
				{"2026-10-24T23:00:00Z", "2026-10-24T23:30:00Z"}, // 01:00 CEST
				{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z"}, // 02:00 CEST; 02:00 CET does not fire
				{"2026-10-25T02:00:00Z", "2026-10-25T02:30:00Z"}, // 03:00 CET
			},
		},
		"Lord Howe spring forward by 30 minutes: 02:15 fires at 02:30 +11": {
			zone: "Australia/Lord_Howe", cron: "15 2 * * *", duration: "10m",
			from: "2026-10-03T13:00:00Z", to: "2026-10-04T13:00:00Z",
			wantActive: [][2]string{{"2026-10-03T15:30:00Z", "2026-10-03T15:40:00Z"}},
		},
		"Lord Howe fall back by 30 minutes: 01:45 fires once, at +11": {
			zone: "Australia/Lord_Howe", cron: "45 1 * * *", duration: "10m",
			from: "2026-04-04T13:00:00Z", to: "2026-04-05T13:00:00Z",
			wantActive: [][2]string{{"2026-04-04T14:45:00Z", "2026-04-04T14:55:00Z"}},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			ds := newSchedule(tc.zone, []v1alpha1.ScheduleTarget{newTarget("a", Stopped)},
				recurring("w", 1, tc.cron, tc.duration, running("a")))
			got := mustEvaluate(t, ds, utc(t, tc.from), utc(t, tc.to))
			var gotActive [][2]string
			for _, iv := range got.Intervals {
				if iv.Source == "w" {
					gotActive = append(gotActive, [2]string{
						iv.Start.UTC().Format(time.RFC3339), iv.End.UTC().Format(time.RFC3339)})
				}
			}
			if diff := cmp.Diff(tc.wantActive, gotActive); diff != "" {
				t.Errorf("active (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRobfigNextDiffersFromSpec records why FireTimes does not use robfig/cron's
// own zone handling: on its own it skips a fire time in a gap and fires an
// ambiguous one twice, both against docs/schedule.md.
func TestRobfigNextDiffersFromSpec(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	testCases := map[string]struct {
		cron, from, to string
		wantSpec       []string
	}{
		"gap": {cron: "30 2 * * *", from: "2026-03-08T05:00:00Z", to: "2026-03-09T05:00:00Z",
			wantSpec: []string{"2026-03-08T07:00:00Z"}},
		"ambiguous": {cron: "30 1 * * *", from: "2026-11-01T04:00:00Z", to: "2026-11-02T05:00:00Z",
			wantSpec: []string{"2026-11-01T05:30:00Z"}},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			c, err := ParseCron(tc.cron)
			if err != nil {
				t.Fatal(err)
			}
			from, to := utc(t, tc.from), utc(t, tc.to)
			var got []string
			for fire := range c.FireTimes(ny, from, to) {
				got = append(got, fire.UTC().Format(time.RFC3339))
			}
			if diff := cmp.Diff(tc.wantSpec, got); diff != "" {
				t.Errorf("FireTimes (-want +got):\n%s", diff)
			}

			raw, err := cron.ParseStandard("CRON_TZ=America/New_York " + tc.cron)
			if err != nil {
				t.Fatal(err)
			}
			var robfig []string
			for fire := raw.Next(from); fire.Before(to); fire = raw.Next(fire) {
				robfig = append(robfig, fire.UTC().Format(time.RFC3339))
			}
			if cmp.Equal(tc.wantSpec, robfig) {
				t.Errorf("robfig/cron now agrees with docs/schedule.md (%v); FireTimes could use it directly", robfig)
			}
		})
	}
}
