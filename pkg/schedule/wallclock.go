package schedule

import "time"

// Wall-clock readings are carried as time.Time values in UTC whose fields are the
// local date and time: UTC has no daylight saving, so cron arithmetic on them is
// plain calendar arithmetic, and the zone is applied once, in resolveWallClock.

// wallClock returns the local date and time of t as a UTC-clock reading.
func wallClock(t time.Time) time.Time {
	_, offset := t.Zone()
	return t.Add(time.Duration(offset) * time.Second).UTC()
}

// resolveWallClock returns the instant at which the local reading c happens in loc,
// following docs/schedule.md: a reading inside a spring-forward gap happens at the first
// instant after the gap, and an ambiguous reading (clocks set back) happens at its
// first occurrence. The mapping never decreases as c increases.
func resolveWallClock(c time.Time, loc *time.Location) time.Time {
	y, mo, d := c.Date()
	h, mi, s := c.Clock()
	t := time.Date(y, mo, d, h, mi, s, c.Nanosecond(), loc)
	if wallClock(t).Equal(c) {
		return firstOccurrence(t, c, loc)
	}
	// The reading was skipped. time.Date normalised it into the zone period before
	// or after the gap; the gap ends where the later of the two periods starts.
	start, end := t.ZoneBounds()
	if wallClock(t).After(c) {
		if start.IsZero() {
			return t
		}
		return start
	}
	if end.IsZero() {
		return t
	}
	return end.In(loc)
}

// firstOccurrence returns the earlier instant reading c when c is ambiguous. Zone
// periods are months long, so an earlier occurrence can only lie in the period just
// before t's.
func firstOccurrence(t, c time.Time, loc *time.Location) time.Time {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return t
	}
	_, prevOffset := start.Add(-time.Nanosecond).Zone()
	earlier := c.Add(-time.Duration(prevOffset) * time.Second).In(loc)
	if earlier.Before(start) && wallClock(earlier).Equal(c) {
		return earlier
	}
	return t
}
