package schedule

import (
	"fmt"
	"time"
)

// Span is a stretch [Start, End) during which a window is active. Start is also
// when the latest occurrence covering the span began (a fire time or activeFrom),
// which is what the equal-priority tie-break compares.
type Span struct {
	Start, End time.Time
}

// NumWindows is the number of windows, in declaration order.
func (s *Schedule) NumWindows() int { return len(s.windows) }

// ActiveSpans returns the spans of window i that overlap [from, to), in order,
// disjoint, and not clipped to the range. A recurring window whose occurrences
// overlap (duration longer than its period) yields one span per fire time, each
// ending where the next begins, so the union stays active without a gap.
func (s *Schedule) ActiveSpans(i int, from, to time.Time) ([]Span, error) {
	if i < 0 || i >= len(s.windows) {
		return nil, fmt.Errorf("window index %d out of range [0, %d)", i, len(s.windows))
	}
	return s.windows[i].spans(s.loc, from, to), nil
}

func (w *window) spans(loc *time.Location, from, to time.Time) []Span {
	if w.cron == nil {
		if w.from.Before(w.until) && w.from.Before(to) && w.until.After(from) {
			return []Span{{Start: w.from, End: w.until}}
		}
		return nil
	}
	// Only the latest fire at or before from can cover from: earlier occurrences
	// end by the time it fires. Finding it without walking from from-duration
	// keeps a long window on a frequent cron cheap.
	after := from
	if last, ok := w.cron.lastFire(loc, from, from.Add(-w.duration)); ok {
		after = last.Add(-time.Nanosecond)
	}
	var out []Span
	for fire := range w.cron.FireTimes(loc, after, to) {
		if n := len(out); n > 0 && out[n-1].End.After(fire) {
			out[n-1].End = fire
		}
		out = append(out, Span{Start: fire, End: fire.Add(w.duration)})
	}
	return out
}
