package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseCron(t *testing.T) {
	testCases := map[string]struct {
		expr    string
		wantErr bool
	}{
		"five fields":                {expr: "0 8 * * 1-5"},
		"names":                      {expr: "0 8 * jan-mar mon-fri"},
		"steps":                      {expr: "*/15 2 * * *"},
		"descriptor as CronJob":      {expr: "@daily"},
		"seconds field":              {expr: "0 0 8 * * *", wantErr: true},
		"four fields":                {expr: "0 8 * *", wantErr: true},
		"minute out of range":        {expr: "60 8 * * *", wantErr: true},
		"TZ prefix":                  {expr: "TZ=UTC 0 8 * * *", wantErr: true},
		"CRON_TZ prefix":             {expr: "CRON_TZ=Asia/Tokyo 0 8 * * *", wantErr: true},
		"TZ without space (panics)":  {expr: "TZ=UTC", wantErr: true},
		"every is a delay, not time": {expr: "@every 1h", wantErr: true},
		"empty":                      {expr: "", wantErr: true},
		"words":                      {expr: "every weekday at eight", wantErr: true},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseCron(tc.expr)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("ParseCron(%q) error = %v, want error: %v", tc.expr, err, tc.wantErr)
			}
		})
	}
}

func TestFireTimesSparse(t *testing.T) {
	testCases := map[string]struct {
		expr     string
		from, to string
		want     []string
	}{
		"29 February across more years than robfig/cron searches": {
			expr: "0 0 29 2 *", from: "2097-01-01T00:00:00Z", to: "2109-01-01T00:00:00Z",
			want: []string{"2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"},
		},
		"30 February never fires and the search ends": {
			expr: "0 0 30 2 *", from: "2026-01-01T00:00:00Z", to: "2046-01-01T00:00:00Z",
		},
		"from itself is excluded, to is excluded": {
			expr: "0 * * * *", from: "2026-01-01T00:00:00Z", to: "2026-01-01T03:00:00Z",
			want: []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			c, err := ParseCron(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for fire := range c.FireTimes(time.UTC, utc(t, tc.from), utc(t, tc.to)) {
				got = append(got, fire.UTC().Format(time.RFC3339))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FireTimes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResolveWallClockMinuteByMinute walks every wall-clock minute around the
// transitions of a year in several zones and checks the two properties the
// evaluator relies on: a reading that exists maps to its first occurrence, one
// that does not maps to the end of its gap, and the mapping never decreases.
func TestResolveWallClockMinuteByMinute(t *testing.T) {
	// America/Santiago moves its clocks at midnight, so whole days start late.
	for _, zone := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago"} {
		t.Run(zone, func(t *testing.T) {
			loc := mustLoad(t, zone)
			transitions := 0
			for at := utc(t, "2026-01-01T00:00:00Z"); ; transitions++ {
				_, end := at.In(loc).ZoneBounds()
				if end.IsZero() || end.Year() != 2026 {
					break
				}
				checkAround(t, loc, end)
				at = end
			}
			if transitions != 2 {
				t.Errorf("checked %d transitions in 2026, want 2", transitions)
			}
		})
	}
}

func checkAround(t *testing.T, loc *time.Location, transition time.Time) {
	t.Helper()
	reading := wallClock(transition.Add(-3 * time.Hour).In(loc)).Truncate(time.Minute)
	var prev time.Time
	for range 6 * 60 {
		got := resolveWallClock(reading, loc)
		switch {
		case got.Before(prev):
			t.Fatalf("resolveWallClock(%s) = %s, before the previous minute's %s", reading, got, prev)
		case wallClock(got).Equal(reading):
			if earlier := got.Add(-time.Hour); wallClock(earlier.In(loc)).Equal(reading) {
				t.Fatalf("resolveWallClock(%s) = %s, but %s reads the same and is earlier", reading, got, earlier)
			}
			if earlier := got.Add(-30 * time.Minute); wallClock(earlier.In(loc)).Equal(reading) {
				t.Fatalf("resolveWallClock(%s) = %s, but %s reads the same and is earlier", reading, got, earlier)
			}
		case !got.Equal(transition):
			t.Fatalf("resolveWallClock(%s) = %s: skipped reading should map to the gap's end %s", reading, got, transition)
		}
		prev = got
		reading = reading.Add(time.Minute)
	}
}
