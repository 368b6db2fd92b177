package forecast

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/rota-dev/rota/pkg/schedule"
)

// swap is one schedule's transition being measured: the demand of the
// loads it changes, per model, at each stage of its steps.
type swap struct {
	s      *Schedule
	tr     schedule.Transition
	before map[string]int32 // every load, just before the instant
	mine   map[string]bool  // the loads the steps change
	// peak is the most the changed loads ask for at any stage.
	peak map[string]int
}

// transitions records every schedule's transitions with the demand while
// their steps run in order. Schedules act independently: another schedule
// changing at the same instant may be at any of its stages, so it counts
// at its own peak.
//
// The demand before, at the peak of and after an instant is the same for
// every transition at that instant, so it is computed once per instant
// from the segments around it (demand adds up load by load), not once per
// transition from every load.
func (r *run) transitions(timelines []*schedule.Timeline) {
	segs := r.segmentIndex()
	byInstant := map[int64][]*swap{}
	var all []*swap
	for i, tl := range timelines {
		s := &r.in.Schedules[i]
		for _, tr := range tl.Transitions {
			sw := &swap{s: s, tr: tr, before: segs.running(tr.At, false), mine: map[string]bool{}, peak: map[string]int{}}
			bseg, aseg := segs.segment(tr.At, false), segs.segment(tr.At, true)
			cur := make(map[string]int32, len(tr.Steps))
			for _, st := range tr.Steps {
				if l := s.Targets[st.Target]; l != nil {
					sw.mine[l.Name] = true
					cur[l.Name] = sw.before[l.Name]
				}
			}
			sw.peak = r.stageDemand(cur, bseg, aseg)
			for _, st := range tr.Steps {
				if l := s.Targets[st.Target]; l != nil {
					cur[l.Name] = r.afterStep(l, st)
					for m, n := range r.stageDemand(cur, bseg, aseg) {
						sw.peak[m] = max(sw.peak[m], n)
					}
				}
			}
			r.stepWarnings(s, tr, sw.before, tl)
			byInstant[tr.At.UnixNano()] = append(byInstant[tr.At.UnixNano()], sw)
			all = append(all, sw)
		}
	}
	instants := make(map[int64]instantDemand, len(byInstant))
	for at, swaps := range byInstant {
		instants[at] = r.instantDemand(segs, swaps)
	}
	// In time order; at one instant, in the order the schedules came
	// (byInstant keeps it).
	order := make([]int64, 0, len(byInstant))
	for at := range byInstant {
		order = append(order, at)
	}
	slices.Sort(order)
	r.out.Transitions = slices.Grow(r.out.Transitions, len(all))
	for _, at := range order {
		d := instants[at]
		for _, sw := range byInstant[at] {
			models := r.modelsOf(sw.mine)
			out := Transition{Schedule: sw.s.Key(), At: sw.tr.At, Steps: sw.tr.Steps,
				Before: only(d.before, models), Peak: only(d.peak, models), After: only(d.after, models)}
			for _, m := range slices.Sorted(maps.Keys(out.Peak)) {
				if out.Peak[m] > r.out.Capacity[m] {
					out.Over = append(out.Over, m)
				}
			}
			r.out.Transitions = append(r.out.Transitions, out)
		}
	}
	sort.SliceStable(r.out.Warnings, func(i, j int) bool { return r.out.Warnings[i].At.Before(r.out.Warnings[j].At) })
}

// instantDemand is the demand per model around one instant where
// schedules change: before it, at its peak and after it.
type instantDemand struct {
	before, peak, after map[string]int
}

// instantDemand computes the demand around the instant of swaps (every
// transition at that instant). The peak is the fixed claims and every load
// no schedule changes then, plus each changing schedule at its own peak:
// the demand before, less what the changing loads ran before.
func (r *run) instantDemand(segs segmentIndex, swaps []*swap) instantDemand {
	at := swaps[0].tr.At
	d := instantDemand{before: segs.demand(r, at, false), after: segs.demand(r, at, true)}
	before := swaps[0].before
	changing := map[string]int32{}
	for _, sw := range swaps {
		for name := range sw.mine {
			if n, ok := before[name]; ok {
				changing[name] = n
			}
		}
	}
	d.peak = maps.Clone(d.before)
	for m, n := range r.stageDemand(changing, segs.segment(at, false), nil) {
		d.peak[m] -= n
	}
	for _, sw := range swaps {
		for m, n := range sw.peak {
			d.peak[m] += n
		}
	}
	return d
}

// segmentIndex finds the segment that ends (or starts) at an instant.
type segmentIndex struct {
	segments   []Segment
	ends, from map[int64]int
}

func (r *run) segmentIndex() segmentIndex {
	idx := segmentIndex{segments: r.out.Segments, ends: make(map[int64]int, len(r.out.Segments)), from: make(map[int64]int, len(r.out.Segments))}
	for i, seg := range r.out.Segments {
		// The first one, if two shared an instant.
		if _, ok := idx.ends[seg.To.UnixNano()]; !ok {
			idx.ends[seg.To.UnixNano()] = i
		}
		if _, ok := idx.from[seg.From.UnixNano()]; !ok {
			idx.from[seg.From.UnixNano()] = i
		}
	}
	return idx
}

func (x segmentIndex) find(t time.Time, after bool) (int, bool) {
	if after {
		i, ok := x.from[t.UnixNano()]
		return i, ok
	}
	i, ok := x.ends[t.UnixNano()]
	return i, ok
}

// running is the running set of the segment that ends at t (after: that
// starts at t), empty if none. It is the segment's own map: read only.
func (x segmentIndex) running(t time.Time, after bool) map[string]int32 {
	if i, ok := x.find(t, after); ok {
		return x.segments[i].Running
	}
	return map[string]int32{}
}

// demand is the demand of that running set, fixed claims included: a
// copy of the segment's.
func (x segmentIndex) demand(r *run, t time.Time, after bool) map[string]int {
	if i, ok := x.find(t, after); ok {
		return maps.Clone(x.segments[i].Demand)
	}
	out := maps.Clone(r.fixed)
	if out == nil {
		out = map[string]int{}
	}
	return out
}

// segment is the segment that ends at t (after: that starts at t), nil if
// none.
func (x segmentIndex) segment(t time.Time, after bool) *Segment {
	if i, ok := x.find(t, after); ok {
		return &x.segments[i]
	}
	return nil
}

// stageDemand is what the running loads ask for, without the fixed
// claims, while a transition's steps run: a load at the replicas it ran
// before the instant (or runs after it) takes the GPUs it was (or is)
// placed on then; at other replicas it counts at first choice.
func (r *run) stageDemand(running map[string]int32, before, after *Segment) map[string]int {
	out := map[string]int{}
	for name, n := range running {
		if n <= 0 {
			continue
		}
		var placed map[string]int
		switch {
		case before != nil && before.Running[name] == n:
			placed = before.Loads[name]
		case after != nil && after.Running[name] == n:
			placed = after.Loads[name]
		default:
			for i, per := range r.perPod[name] {
				pods := int(n) * r.loads[name].Replica[i].Pods
				for model, c := range per {
					out[model] += pods * c
				}
			}
			continue
		}
		for model, c := range placed {
			out[model] += c
		}
	}
	return out
}

// intentAt is the target's intent of the interval that opens at t in tl.
func intentAt(tl *schedule.Timeline, target string, t time.Time) schedule.Intent {
	for _, iv := range tl.Intervals {
		if iv.Target == target && iv.Start.Equal(t) {
			return iv.Intent
		}
	}
	return schedule.Intent{}
}

// afterStep is the replicas of l once the step ran.
func (r *run) afterStep(l *Load, st schedule.Step) int32 {
	switch {
	case st.Action == schedule.ActionStop:
		return 0
	case st.Replicas > 0:
		return st.Replicas
	default:
		return l.Replicas
	}
}

// modelsOf are the models the named loads use, at first choice or where
// they are placed.
func (r *run) modelsOf(loads map[string]bool) map[string]bool {
	out := map[string]bool{}
	for name := range loads {
		for m := range r.out.Uses[name] {
			out[m] = true
		}
	}
	return out
}

func only(m map[string]int, keep map[string]bool) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if keep[k] {
			out[k] = v
		}
	}
	return out
}
