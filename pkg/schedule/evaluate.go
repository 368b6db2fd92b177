package schedule

import (
	"fmt"
	"slices"
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
	total := 0
	for ti := range s.targets {
		for _, ws := range s.targets[ti].windows {
			if !computed[ws.window] {
				spans[ws.window] = s.windows[ws.window].spans(s.loc, from, to)
				computed[ws.window] = true
			}
		}
		perTarget[ti] = s.targetIntervals(&s.targets[ti], spans, from, to)
		total += len(perTarget[ti])
	}
	intervals := make([]Interval, 0, total)
	for _, ivs := range perTarget {
		intervals = append(intervals, ivs...)
	}
	slices.SortStableFunc(intervals, func(a, b Interval) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.Target, b.Target)
	})
	return &Timeline{Intervals: intervals, Transitions: s.transitions(perTarget)}, nil
}

// targetIntervals sweeps the instants where any window naming t opens or closes
// and merges neighbouring stretches of equal intent.
func (s *Schedule) targetIntervals(t *target, spans [][]Span, from, to time.Time) []Interval {
	bounds := []time.Time{from}
	for _, ws := range t.windows {
		for _, sp := range spans[ws.window] {
			if sp.Start.After(from) {
				bounds = append(bounds, sp.Start)
			}
			if sp.End.After(from) && sp.End.Before(to) {
				bounds = append(bounds, sp.End)
			}
		}
	}
	slices.SortFunc(bounds, time.Time.Compare)
	bounds = slices.CompactFunc(bounds, time.Time.Equal)

	cursor := make([]int, len(t.windows))
	var out []Interval
	for k, at := range bounds {
		end := to
		if k+1 < len(bounds) {
			end = bounds[k+1]
		}
		intent := s.intentAt(t, spans, cursor, at)
		if n := len(out); n > 0 && out[n-1].Intent == intent {
			out[n-1].End = end
			continue
		}
		out = append(out, Interval{Target: t.name, Start: at, End: end, Intent: intent})
	}
	return out
}

// intentAt returns t's intent at instant at. cursor[i] is the first span of
// t.windows[i] that may still cover at; calls must come in increasing at.
func (s *Schedule) intentAt(t *target, spans [][]Span, cursor []int, at time.Time) Intent {
	best := -1
	var bestStart time.Time
	for i, ws := range t.windows {
		sp := spans[ws.window]
		for cursor[i] < len(sp) && !sp[cursor[i]].End.After(at) {
			cursor[i]++
		}
		if cursor[i] == len(sp) || sp[cursor[i]].Start.After(at) {
			continue
		}
		start := sp[cursor[i]].Start
		if best < 0 || s.beats(ws.window, start, t.windows[best].window, bestStart) {
			best, bestStart = i, start
		}
	}
	if best < 0 {
		return t.defaultIntent
	}
	return t.windows[best].intent
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
