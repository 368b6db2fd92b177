package schedule

import (
	"time"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// change is one target's step at one instant, before steps are ordered.
type change struct {
	at      time.Time
	step    Step
	acquire bool
}

// transitions turns per-target intervals (in target declaration order) into
// transition plans: one per instant where some target's (state, replicas)
// changes. A change of allowDowntime or source alone opens an interval but needs
// no action.
func (s *Schedule) transitions(perTarget [][]Interval) []Transition {
	perTargetChanges := make([][]change, len(perTarget))
	for ti, ivs := range perTarget {
		if len(ivs) > 1 {
			perTargetChanges[ti] = make([]change, 0, len(ivs)-1)
		}
		for k := 1; k < len(ivs); k++ {
			if step, acquire, ok := stepBetween(ivs[k-1].Intent, ivs[k].Intent); ok {
				step.Target = ivs[k].Target
				perTargetChanges[ti] = append(perTargetChanges[ti], change{at: ivs[k].Start, step: step, acquire: acquire})
			}
		}
	}
	// Changes at one instant stay in target declaration order.
	changes := mergeSorted(perTargetChanges, func(a, b change) int { return a.at.Compare(b.at) })

	var out []Transition
	for len(changes) > 0 {
		n := 1
		for n < len(changes) && changes[n].at.Equal(changes[0].at) {
			n++
		}
		out = append(out, Transition{At: changes[0].at, Steps: s.orderSteps(changes[:n])})
		changes = changes[n:]
	}
	return out
}

// orderSteps puts release steps (Stop, scale-down) before acquire steps (Start,
// scale-up), each group in target order; AcquireFirst swaps the groups.
func (s *Schedule) orderSteps(changes []change) []Step {
	var release, acquire []Step
	for _, c := range changes {
		if c.acquire {
			acquire = append(acquire, c.step)
		} else {
			release = append(release, c.step)
		}
	}
	if s.order == v1alpha1.TransitionOrderAcquireFirst {
		return append(acquire, release...)
	}
	return append(release, acquire...)
}

// stepBetween returns the step that takes a target from prev to next, and whether
// it acquires capacity. A Scale whose direction cannot be known statically (either
// side unpinned) counts as an acquire, so preflight checks it.
func stepBetween(prev, next Intent) (step Step, acquire, ok bool) {
	switch {
	case prev.State == next.State && prev.Replicas == next.Replicas:
		return Step{}, false, false
	case next.State == v1alpha1.StateStopped:
		return Step{Action: ActionStop}, false, true
	case prev.State == v1alpha1.StateStopped:
		return Step{Action: ActionStart, Replicas: next.Replicas}, true, true
	default:
		down := prev.Replicas != 0 && next.Replicas != 0 && next.Replicas < prev.Replicas
		return Step{Action: ActionScale, Replicas: next.Replicas}, !down, true
	}
}
