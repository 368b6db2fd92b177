package schedule

import (
	"fmt"
	"strings"
	"time"
)

// Evaluate computes every target's intent intervals over [from, to) and the
// transitions inside it. Evaluating a sub-range gives the same intents as
// evaluating a larger one, clipped: nothing depends on where the range starts.
func (s *Schedule) Evaluate(from, to time.Time) (*Timeline, error) {
	if !from.Before(to) {
		return nil, fmt.Errorf("empty range: from %s is not before to %s",
			from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	spans := make([][]Span, len(s.windows))
	computed := make([]bool, len(s.windows))
	perTarget := make([][]Interval, len(s.targets))
	for ti := range s.targets {
		for _, ws := range s.targets[ti].windows {
			if !computed[ws.window] {
				spans[ws.window] = s.windows[ws.window].spans(s.loc, from, to)
				computed[ws.window] = true
			}
		}
		perTarget[ti] = s.targetIntervals(&s.targets[ti], spans, from, to)
	}
	intervals := mergeSorted(perTarget, func(a, b Interval) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.Target, b.Target)
	})
	return &Timeline{Intervals: intervals, Transitions: s.transitions(perTarget)}, nil
}

// targetIntervals sweeps [from, to) from one instant where a window naming t
// opens or closes to the next, and merges neighbouring stretches of equal intent.
func (s *Schedule) targetIntervals(t *target, spans [][]Span, from, to time.Time) []Interval {
	// cursor[i] is the first span of t.windows[i] that ends after the current instant.
	cursor := make([]int, len(t.windows))
	// Every span opens and closes at most one interval: sized once, the
	// slice is not grown (and copied) interval by interval.
	n := 1
	for _, ws := range t.windows {
		n += 2 * len(spans[ws.window])
	}
	out := make([]Interval, 0, n)
	for at := from; at.Before(to); {
		intent, next := s.intentAt(t, spans, cursor, at, to)
		if n := len(out); n > 0 && out[n-1].Intent == intent {
			out[n-1].End = next
		} else {
			out = append(out, Interval{Target: t.name, Start: at, End: next, Intent: intent})
		}
		at = next
	}
	return out
}

// intentAt returns t's intent at instant at and the next instant (at most to)
// where a window naming t opens or closes. Calls must come in increasing at.
func (s *Schedule) intentAt(t *target, spans [][]Span, cursor []int, at, to time.Time) (Intent, time.Time) {
	best, next := -1, to
	var bestStart time.Time
	for i, ws := range t.windows {
		sp := spans[ws.window]
		for cursor[i] < len(sp) && !sp[cursor[i]].End.After(at) {
			cursor[i]++
		}
		if cursor[i] == len(sp) {
			continue
		}
		current := sp[cursor[i]]
		if current.Start.After(at) {
			next = earliest(next, current.Start)
			continue
		}
		next = earliest(next, current.End)
		if best < 0 || s.beats(ws.window, current.Start, t.windows[best].window, bestStart) {
			best, bestStart = i, current.Start
		}
	}
	if best < 0 {
		return t.defaultIntent, next
	}
	return t.windows[best].intent, next
}

// beats reports whether window a, active since aStart, wins over window b, active
// since bStart: higher priority, then the later start, then the name that sorts
// first. Validation rejects equal priorities that can overlap; the rest of the
// order only keeps the answer deterministic where that could not be decided.
func (s *Schedule) beats(a int, aStart time.Time, b int, bStart time.Time) bool {
	wa, wb := &s.windows[a], &s.windows[b]
	if wa.priority != wb.priority {
		return wa.priority > wb.priority
	}
	if !aStart.Equal(bStart) {
		return aStart.After(bStart)
	}
	return wa.name < wb.name
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
