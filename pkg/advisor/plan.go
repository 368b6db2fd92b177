package advisor

import (
	"sort"
)

// Outcomes of a planned unit.
const (
	// OutcomeMove: the unit is admitted by the move plan of its Move.
	OutcomeMove = "move"
	// OutcomeFits: the unit fits without a move once the earlier units'
	// moves are made (or already does): the scheduler places it.
	OutcomeFits = "fits"
	// OutcomeBlocked: no move plan admits the unit; Reason says why (its
	// advice's first option: quota, tier, wait or none).
	OutcomeBlocked = "blocked"
)

// PlannedUnit is one waiting unit in a defragmentation plan.
type PlannedUnit struct {
	Workload string   `json:"workload"`
	Pods     []string `json:"pods"`
	Priority int32    `json:"priority"`
	Outcome  string   `json:"outcome"`
	// Move is the cheapest move plan that admits the unit in the cluster
	// as the earlier units' moves and placements leave it.
	Move *Option `json:"move,omitempty"`
	// Placement is where the unit lands (for a move or a fit).
	Placement []Placed `json:"placement,omitempty"`
	// Reason is, for blocked, the advice's first option ("quota: ...").
	Reason string `json:"reason,omitempty"`
	// Truncated is true when the unit's search stopped at its bound.
	Truncated bool `json:"truncated,omitempty"`
}

// PlanAll plans the moves that admit every unit, one unit after another:
// units of higher priority first, units of equal priority in the order
// given (callers pass the oldest first). Each unit is advised in the
// cluster as the earlier units left it: their disturbed workloads released
// (those that move placed where their move lands), the units placed on the
// devices they were planned onto, and the disruption budgets they used
// spent. A workload moved or a unit placed by an earlier step is not
// disturbed again, so no two units are planned onto the same GPUs. snap is
// not changed.
func PlanAll(snap *Snapshot, units []*Workload, opts Options) []PlannedUnit {
	order := make([]*Workload, len(units))
	copy(order, units)
	sort.SliceStable(order, func(i, j int) bool { return order[i].Priority > order[j].Priority })
	cur := copySnapshot(snap)
	var out []PlannedUnit
	for _, u := range order {
		if len(u.Groups) == 0 {
			continue
		}
		pu := PlannedUnit{Workload: u.Key, Pods: u.pods(), Priority: u.Priority}
		adv := Advise(cur, u, opts)
		pu.Truncated = adv.Truncated
		var move *Option
		for i := range adv.Options {
			if adv.Options[i].Kind == KindMove {
				move = &adv.Options[i]
				break
			}
		}
		switch {
		case len(adv.Options) == 0 && !adv.Truncated:
			next, placed, ok := applyMove(cur, u, nil)
			if !ok {
				pu.Outcome, pu.Reason = OutcomeBlocked, "fits by the advisor's check but could not be placed"
				break
			}
			cur, pu.Outcome, pu.Placement = next, OutcomeFits, placed
		case move != nil:
			next, placed, ok := applyMove(cur, u, move.Steps)
			if !ok {
				pu.Outcome, pu.Reason = OutcomeBlocked, "its move plan could not be replayed"
				break
			}
			cur, pu.Outcome, pu.Move, pu.Placement = next, OutcomeMove, move, placed
		default:
			pu.Outcome = OutcomeBlocked
			if len(adv.Options) > 0 {
				pu.Reason = string(adv.Options[0].Kind) + ": " + adv.Options[0].Summary
			} else {
				pu.Reason = "the search stopped at its bound before finding a move"
			}
		}
		out = append(out, pu)
	}
	return out
}

// applyMove returns snap after steps (a move option's steps, nil for none)
// and u's placement: the disturbed workloads released, u placed, and each
// moved workload placed off the devices it left, in the order and by the
// rules Advise used to write the steps, so the devices are the same ones.
func applyMove(snap *Snapshot, u *Workload, steps []Step) (*Snapshot, []Placed, bool) {
	ix := newIndex(snap)
	w := ix.now()
	holder := map[string]string{}
	for _, d := range snap.Devices {
		holder[d.ID] = d.Holder
	}
	gone := map[string]bool{}
	for _, st := range steps {
		r := ix.running[st.Workload]
		if r == nil || r.Fixed != "" {
			return nil, nil, false
		}
		w.release(r)
		for _, id := range r.Held {
			holder[id] = ""
		}
		gone[r.Key] = true
	}
	placed, ok := w.place(u, nil)
	if !ok {
		return nil, nil, false
	}
	moved := map[string][]string{}
	for _, st := range steps {
		if st.Action != "move" {
			continue
		}
		r := ix.running[st.Workload]
		to, ok := w.place(r, setOf(r.Held))
		if !ok {
			return nil, nil, false
		}
		for _, p := range to {
			moved[r.Key] = append(moved[r.Key], p.Devices...)
		}
	}
	next := copySnapshot(snap)
	next.Running = next.Running[:0]
	for _, r := range snap.Running {
		switch {
		case !gone[r.Key]:
			next.Running = append(next.Running, r)
		case moved[r.Key] != nil:
			r.Held, r.Fixed = moved[r.Key], "moved by an earlier step of the plan"
			for _, id := range r.Held {
				holder[id] = r.Key
			}
			next.Running = append(next.Running, r)
		}
		if gone[r.Key] {
			for b, n := range r.Budgets {
				next.Budgets[b] -= n
			}
		}
	}
	unit := *u
	unit.Held, unit.Fixed = nil, "placed by an earlier step of the plan"
	for _, p := range placed {
		unit.Held = append(unit.Held, p.Devices...)
		for _, id := range p.Devices {
			holder[id] = u.Key
		}
	}
	next.Running = append(next.Running, unit)
	for i := range next.Devices {
		next.Devices[i].Holder = holder[next.Devices[i].ID]
	}
	return next, placed, true
}

// copySnapshot copies what a plan changes: devices, running workloads and
// budgets; the rest is shared read-only.
func copySnapshot(s *Snapshot) *Snapshot {
	c := *s
	c.Devices = append([]Device(nil), s.Devices...)
	c.Running = append([]Workload(nil), s.Running...)
	c.Budgets = make(map[string]int, len(s.Budgets))
	for k, v := range s.Budgets {
		c.Budgets[k] = v
	}
	return &c
}
