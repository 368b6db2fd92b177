package forecast

import (
	"maps"
	"sort"
	"time"

	"github.com/rota-dev/rota/pkg/schedule"
)

// transitions records every schedule's transitions with the demand while
// their steps run in order.
func (r *run) transitions(timelines []*schedule.Timeline) {
	// changing[at] are the loads any schedule changes at that instant, with
	// their replicas before and after.
	type change struct{ before, after int32 }
	changing := map[time.Time]map[string]change{}
	for i, tl := range timelines {
		s := &r.in.Schedules[i]
		for _, tr := range tl.Transitions {
			before, after := r.stateAt(tr.At, false), r.stateAt(tr.At, true)
			for _, st := range tr.Steps {
				l := s.Targets[st.Target]
				if l == nil {
					continue
				}
				if changing[tr.At] == nil {
					changing[tr.At] = map[string]change{}
				}
				changing[tr.At][l.Name] = change{before[l.Name], after[l.Name]}
			}
		}
	}
	for i, tl := range timelines {
		s := &r.in.Schedules[i]
		for _, tr := range tl.Transitions {
			mine := map[string]bool{}
			for _, st := range tr.Steps {
				if l := s.Targets[st.Target]; l != nil {
					mine[l.Name] = true
				}
			}
			cur := r.stateAt(tr.At, false)
			r.stepWarnings(s, tr, cur, intentsAt(tl, tr.At))
			for name, c := range changing[tr.At] {
				if !mine[name] {
					cur[name] = max(c.before, c.after)
				}
			}
			out := Transition{Schedule: s.Key(), At: tr.At, Steps: tr.Steps, Before: r.demand(cur)}
			out.Peak = maps.Clone(out.Before)
			for _, st := range tr.Steps {
				l := s.Targets[st.Target]
				if l == nil {
					continue
				}
				cur[l.Name] = r.afterStep(l, st)
				for m, n := range r.demand(cur) {
					out.Peak[m] = max(out.Peak[m], n)
				}
			}
			out.After = r.demand(cur)
			models := r.modelsOf(mine)
			out.Before, out.Peak, out.After = only(out.Before, models), only(out.Peak, models), only(out.After, models)
			for _, m := range sortedKeys(out.Peak) {
				if out.Peak[m] > r.out.Capacity[m] {
					out.Over = append(out.Over, m)
				}
			}
			r.out.Transitions = append(r.out.Transitions, out)
		}
	}
	sort.SliceStable(r.out.Transitions, func(i, j int) bool { return r.out.Transitions[i].At.Before(r.out.Transitions[j].At) })
	sort.SliceStable(r.out.Warnings, func(i, j int) bool { return r.out.Warnings[i].At.Before(r.out.Warnings[j].At) })
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
