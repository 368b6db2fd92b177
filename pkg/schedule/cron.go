package schedule

import (
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron is a parsed standard five-field cron expression, read as wall-clock time in
// whatever zone it is evaluated in.
type Cron struct {
	// spec matches wall-clock readings; its Location is UTC, see wallclock.go.
	spec cron.SpecSchedule
}

// ParseCron parses expr as Kubernetes CronJob does (robfig/cron's standard parser:
// five fields or a descriptor such as @daily), and also rejects what has no meaning
// for a window that opens at wall-clock fire times: TZ/CRON_TZ prefixes (the
// schedule's timeZone decides the zone) and @every (a delay, not a clock time).
func ParseCron(expr string) (c *Cron, err error) {
	if strings.Contains(expr, "TZ") {
		return nil, errors.New("TZ and CRON_TZ are not supported in cron; use spec.timeZone")
	}
	if strings.HasPrefix(strings.TrimSpace(expr), "@every") {
		return nil, errors.New("@every is not supported; a window opens at wall-clock fire times")
	}
	// robfig/cron panics on some malformed input; Kubernetes recovers the same way.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("unparsable cron expression: %v", r)
		}
	}()
	parsed, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("unparsable cron expression: %w", err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unsupported cron expression %q", expr)
	}
	c = &Cron{spec: *spec}
	c.spec.Location = time.UTC
	return c, nil
}

// searchYears is how far robfig/cron looks for a match before giving up.
const searchYears = 5

// FireTimes yields, in increasing order and each once, the instants in (after,
// until) at which the cron fires in loc. Wall-clock fire times that do not exist
// or exist twice are resolved by resolveWallClock; several readings inside one
// spring-forward gap fire once, at the end of the gap.
func (c *Cron) FireTimes(loc *time.Location, after, until time.Time) iter.Seq[time.Time] {
	return func(yield func(time.Time) bool) {
		limit := wallClock(until.In(loc)).AddDate(0, 0, 1)
		// A fire time after `after` cannot read earlier than after's own wall
		// clock, because resolveWallClock never decreases.
		reading := wallClock(after.In(loc)).Truncate(time.Minute).Add(-time.Second)
		var last time.Time
		for reading.Before(limit) {
			next := c.spec.Next(reading)
			if next.IsZero() {
				// Nothing in the search horizon (e.g. 29 February); look further.
				reading = time.Date(reading.Year()+searchYears+1, time.January, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second)
				continue
			}
			reading = next
			fire := resolveWallClock(reading, loc)
			if !fire.After(after) || fire.Equal(last) {
				continue
			}
			if !fire.Before(until) {
				return
			}
			last = fire
			if !yield(fire) {
				return
			}
		}
	}
}

// lastFire returns the latest fire instant in (notBefore, at]. It looks back a
// minute, then twice as far each time, so the work is about the number of fire
// times in the last gap between fires, not in the whole lookback.
func (c *Cron) lastFire(loc *time.Location, at, notBefore time.Time) (time.Time, bool) {
	for back := time.Minute; ; back *= 2 {
		lo := at.Add(-back)
		if !lo.After(notBefore) || back <= 0 {
			lo = notBefore
		}
		var last time.Time
		found := false
		for fire := range c.FireTimes(loc, lo, at.Add(time.Nanosecond)) {
			last, found = fire, true
		}
		if found || lo.Equal(notBefore) {
			return last, found
		}
	}
}
