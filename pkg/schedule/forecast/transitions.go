package forecast

import (
	"maps"
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
func (r *run) transitions(timelines []*schedule.Timeline) {
	byInstant := map[int64][]*swap{}
	var all []*swap
	for i, tl := range timelines {
		s := &r.in.Schedules[i]
		for _, tr := range tl.Transitions {
			sw := &swap{s: s, tr: tr, before: r.stateAt(tr.At, false), mine: map[string]bool{}, peak: map[string]int{}}
			cur := map[string]int32{}
			for _, st := range tr.Steps {
				if l := s.Targets[st.Target]; l != nil {
					sw.mine[l.Name] = true
					cur[l.Name] = sw.before[l.Name]
				}
			}
			sw.peak = r.loadDemand(cur)
			for _, st := range tr.Steps {
				if l := s.Targets[st.Target]; l != nil {
					cur[l.Name] = r.afterStep(l, st)
					for m, n := range r.loadDemand(cur) {
						sw.peak[m] = max(sw.peak[m], n)
					}
				}
			}
			r.stepWarnings(s, tr, sw.before, intentsAt(tl, tr.At))
			byInstant[tr.At.UnixNano()] = append(byInstant[tr.At.UnixNano()], sw)
			all = append(all, sw)
		}
	}
	for _, sw := range all {
		// base: the fixed claims and every load no schedule changes now.
		changing := map[string]bool{}
		for _, other := range byInstant[sw.tr.At.UnixNano()] {
			for name := range other.mine {
				changing[name] = true
			}
		}
		rest := map[string]int32{}
		for name, n := range sw.before {
			if !changing[name] {
				rest[name] = n
			}
		}
		peak := r.demand(rest)
		for _, other := range byInstant[sw.tr.At.UnixNano()] {
			for m, n := range other.peak {
				peak[m] += n
			}
		}
		out := Transition{Schedule: sw.s.Key(), At: sw.tr.At, Steps: sw.tr.Steps,
			Before: r.demand(sw.before), Peak: peak, After: r.demand(r.stateAt(sw.tr.At, true))}
		models := r.modelsOf(sw.mine)
		out.Before, out.Peak, out.After = only(out.Before, models), only(out.Peak, models), only(out.After, models)
		for _, m := range sortedKeys(out.Peak) {
			if out.Peak[m] > r.out.Capacity[m] {
				out.Over = append(out.Over, m)
			}
		}
		r.out.Transitions = append(r.out.Transitions, out)
	}
	sort.SliceStable(r.out.Transitions, func(i, j int) bool { return r.out.Transitions[i].At.Before(r.out.Transitions[j].At) })
	sort.SliceStable(r.out.Warnings, func(i, j int) bool { return r.out.Warnings[i].At.Before(r.out.Warnings[j].At) })
}

// loadDemand is what the running loads ask for, without the fixed claims.
func (r *run) loadDemand(running map[string]int32) map[string]int {
	out := map[string]int{}
	for name, n := range running {
		for i, per := range r.perPod[name] {
			pods := int(n) * r.loads[name].Replica[i].Pods
			for model, c := range per {
				out[model] += pods * c
			}
		}
	}
	return out
}

// intentsAt are the targets' intents of the intervals that open at t.
func intentsAt(tl *schedule.Timeline, t time.Time) map[string]schedule.Intent {
	out := map[string]schedule.Intent{}
	for _, iv := range tl.Intervals {
		if iv.Start.Equal(t) {
			out[iv.Target] = iv.Intent
		}
	}
	return out
}

// stateAt is the running set of the segment that ends at t (after: that
// starts at t).
func (r *run) stateAt(t time.Time, after bool) map[string]int32 {
	for i, seg := range r.out.Segments {
		if (after && seg.From.Equal(t)) || (!after && seg.To.Equal(t)) {
			return maps.Clone(r.out.Segments[i].Running)
		}
	}
	return map[string]int32{}
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

// modelsOf are the models the named loads use.
func (r *run) modelsOf(loads map[string]bool) map[string]bool {
	out := map[string]bool{}
	for name := range loads {
		for _, per := range r.perPod[name] {
			for m := range per {
				out[m] = true
			}
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
