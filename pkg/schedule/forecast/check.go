package forecast

import (
	"maps"
	"slices"
)

// check records seg's over-commits: one per model that the pods finding
// no node ask for at first choice, by count when one of them finds too
// few free GPUs of any model it accepts, else by fragmentation; and by
// count for a model whose GPUs exceed its capacity without those pods
// (the loads the forecast cannot place count at first choice).
func (r *run) check(seg *Segment) {
	reasons, details := map[string]string{}, map[string]string{}
	rest := maps.Clone(seg.Demand)
	for _, u := range seg.Unplaced {
		for model, n := range u.GPUs {
			rest[model] -= n
		}
	}
	for model, n := range rest {
		if n > r.out.Capacity[model] {
			reasons[model] = ReasonCount
		}
	}
	for _, u := range seg.Unplaced {
		for model := range u.GPUs {
			if reasons[model] != ReasonCount {
				reasons[model] = u.Reason
			}
			if details[model] == "" && u.Reason == ReasonFragmentation {
				details[model] = u.Detail
			}
		}
	}
	for _, model := range slices.Sorted(maps.Keys(reasons)) {
		detail := ""
		if reasons[model] == ReasonFragmentation {
			detail = details[model]
		}
		r.record(*seg, model, reasons[model], detail)
	}
}

// record adds an over-commit of model over seg, extending the previous one
// when it is the same window continued.
func (r *run) record(seg Segment, model, reason, detail string) {
	oc := Overcommit{Model: model, From: seg.From, To: seg.To, Demand: seg.Demand[model],
		Capacity: r.out.Capacity[model], Reason: reason, Detail: detail}
	for _, name := range slices.Sorted(maps.Keys(seg.Running)) {
		if seg.Loads[name][model] == 0 {
			continue
		}
		if r.always(name) {
			oc.Others = append(oc.Others, name)
		} else {
			oc.Targets = append(oc.Targets, name)
		}
	}
	oc.Others = append(oc.Others, r.holders[model]...)
	if n := len(r.out.Overcommits); n > 0 {
		last := &r.out.Overcommits[n-1]
		if last.To.Equal(oc.From) && last.Model == oc.Model && last.Reason == oc.Reason && last.Demand == oc.Demand &&
			slices.Equal(last.Targets, oc.Targets) && slices.Equal(last.Others, oc.Others) {
			last.To = oc.To
			return
		}
	}
	r.out.Overcommits = append(r.out.Overcommits, oc)
}

// recordFallbacks adds seg's fallbacks, extending the previous window of
// the same load, model and GPUs when it ends where seg starts.
func (r *run) recordFallbacks(seg Segment) {
	for _, fb := range seg.Fallbacks {
		extended := false
		for i := len(r.out.Fallbacks) - 1; i >= 0; i-- {
			w := &r.out.Fallbacks[i]
			if w.To.Equal(seg.From) && w.Fallback == fb {
				w.To = seg.To
				extended = true
				break
			}
		}
		if !extended {
			r.out.Fallbacks = append(r.out.Fallbacks, FallbackWindow{From: seg.From, To: seg.To, Fallback: fb, Target: !r.always(fb.Load)})
		}
	}
}

func (r *run) always(name string) bool {
	for i := range r.in.Always {
		if r.in.Always[i].Name == name {
			return true
		}
	}
	return false
}
