package forecast

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// run is one forecast being computed.
type run struct {
	in       *Input
	pool     *pool
	previewr *preview.Previewer
	// loads are every load by name; perPod their pods' GPUs per model, per
	// pod template (the order of Load.Replica).
	loads  map[string]*Load
	perPod map[string][]map[string]int
	// prefer is each load's first-choice model per pod template and
	// request (requestKey).
	prefer map[string][]map[string]string
	// fixed is what the allocated claims hold, per model.
	fixed map[string]int
	// fixedNodes is fixed per node and model.
	fixedNodes map[string]map[string]int
	// holders name the pods behind fixed, per model.
	holders map[string][]string
	// unmatched are the loads with a request no device matches, or whose
	// claims the allocator refuses: counted at first choice for what
	// matches, never placed.
	unmatched map[string]bool
	// placer follows the pods from stretch to stretch.
	placer placer
	// nodeList are the nodes pods are placed on (nodes()), once.
	nodeList []*v1.Node
	// startOrder is, per instant, the order in which the schedules'
	// transitions start or scale up each load then (schedule, then step).
	startOrder map[int64]map[string]int
	// quotas answers the transitions' quota checks.
	quotas *quotaCheck
	out    *Forecast
}

// loadSteps is one target's replicas over the range.
type loadSteps struct {
	load      string
	schedule  string
	intervals []schedule.Interval
}

// Run computes the forecast of in.
func Run(ctx context.Context, in Input) (*Forecast, error) {
	if !in.From.Before(in.To) {
		return nil, fmt.Errorf("empty range: from %s is not before to %s", in.From.Format(time.RFC3339), in.To.Format(time.RFC3339))
	}
	// The schedules are copied: a target left out is removed from the copy.
	in.Schedules = append([]Schedule(nil), in.Schedules...)
	r := &run{in: &in, pool: newPool(&in), previewr: preview.New(), loads: map[string]*Load{},
		perPod: map[string][]map[string]int{}, prefer: map[string][]map[string]string{}, unmatched: map[string]bool{},
		placer: placer{live: map[string][]*livePod{}}, startOrder: map[int64]map[string]int{},
		quotas: newQuotaCheck(in.Quotas)}
	r.out = &Forecast{From: in.From, To: in.To, Capacity: r.pool.capacity, Nodes: r.pool.nodes, Notes: append([]string(nil), in.Notes...)}
	r.fixed, r.holders = r.pool.allocatedByModel(in.Allocated)
	r.fixedNodes = r.pool.allocatedByNode(in.Allocated)
	var steps []loadSteps
	timelines := make([]*schedule.Timeline, len(in.Schedules))
	for i := range in.Schedules {
		s := &in.Schedules[i]
		tl, err := s.Compiled.Evaluate(in.From, in.To)
		if err != nil {
			return nil, fmt.Errorf("schedule %s: %w", s.Key(), err)
		}
		timelines[i] = tl
		r.noteStartOrder(s, tl)
		byTarget := map[string][]schedule.Interval{}
		for _, iv := range tl.Intervals {
			byTarget[iv.Target] = append(byTarget[iv.Target], iv)
		}
		kept := make(map[string]*Load, len(s.Targets))
		for _, name := range slices.Sorted(maps.Keys(s.Targets)) {
			if err := r.addLoad(ctx, s.Targets[name]); err != nil {
				// One tenant's claim the pool cannot read leaves that
				// target out, not everyone's forecast.
				r.out.Notes = append(r.out.Notes, fmt.Sprintf("%s left out: %v", s.Targets[name].Name, err))
				continue
			}
			kept[name] = s.Targets[name]
			steps = append(steps, loadSteps{load: s.Targets[name].Name, schedule: s.Key(), intervals: byTarget[name]})
		}
		s.Targets = kept
		r.out.Windows = append(r.out.Windows, windowsOf(s.Key(), tl)...)
	}
	var always []Load
	for i := range in.Always {
		if err := r.addLoad(ctx, &in.Always[i]); err != nil {
			r.out.Notes = append(r.out.Notes, fmt.Sprintf("%s left out: %v", in.Always[i].Name, err))
			continue
		}
		always = append(always, in.Always[i])
	}
	in.Always = always
	r.segments(ctx, steps)
	r.out.Uses = map[string]map[string]bool{}
	for name := range r.loads {
		r.out.Uses[name] = map[string]bool{}
		for _, per := range r.perPod[name] {
			for m := range per {
				r.out.Uses[name][m] = true
			}
		}
	}
	for _, seg := range r.out.Segments {
		for name, per := range seg.Loads {
			for m, n := range per {
				if n > 0 {
					r.out.Uses[name][m] = true
				}
			}
		}
	}
	r.transitions(timelines)
	r.out.Models = r.models()
	return r.out, nil
}

func (r *run) addLoad(ctx context.Context, l *Load) error {
	if _, dup := r.loads[l.Name]; dup {
		return fmt.Errorf("load %s given twice", l.Name)
	}
	l = &Load{Name: l.Name, Replica: defaulted(l.Replica), Replicas: l.Replicas, Namespace: l.Namespace, Alias: l.Alias}
	r.loads[l.Name] = l
	per := make([]map[string]int, len(l.Replica))
	prefer := make([]map[string]string, len(l.Replica))
	for i, d := range l.Replica {
		m, first, notes, err := r.pool.perPod(ctx, d.PodClaims)
		if err != nil {
			return fmt.Errorf("%s: %w", l.Name, err)
		}
		for _, n := range notes {
			r.out.Notes = append(r.out.Notes, l.Name+": "+n)
			r.unmatched[l.Name] = true
		}
		per[i], prefer[i] = m, first
	}
	r.perPod[l.Name], r.prefer[l.Name] = per, prefer
	return nil
}

// replicas is how many replicas of load an intent runs.
func (r *run) replicas(load string, in schedule.Intent) int32 {
	if in.State != v1alpha1.StateRunning {
		return 0
	}
	if in.Replicas > 0 {
		return in.Replicas
	}
	return r.loads[load].Replicas
}

// segments sweeps the instants where some target's intent changes and
// places the pods of each stretch between them, in time order, then
// records its over-commits and fallbacks.
func (r *run) segments(ctx context.Context, steps []loadSteps) {
	// Keyed by instant, not time.Time: schedules in different zones give
	// equal instants with different locations.
	cuts := map[int64]time.Time{r.in.From.UnixNano(): r.in.From}
	for _, ls := range steps {
		for _, iv := range ls.intervals {
			cuts[iv.Start.UnixNano()] = iv.Start.In(r.in.From.Location())
		}
	}
	instants := make([]time.Time, 0, len(cuts))
	for _, t := range cuts {
		instants = append(instants, t)
	}
	sort.Slice(instants, func(i, j int) bool { return instants[i].Before(instants[j]) })
	cursor := make([]int, len(steps))
	for i, at := range instants {
		end := r.in.To
		if i+1 < len(instants) {
			end = instants[i+1]
		}
		running := map[string]int32{}
		for j := range r.in.Always {
			if n := r.in.Always[j].Replicas; n > 0 {
				running[r.in.Always[j].Name] = n
			}
		}
		for k, ls := range steps {
			for cursor[k]+1 < len(ls.intervals) && !ls.intervals[cursor[k]].End.After(at) {
				cursor[k]++
			}
			if len(ls.intervals) == 0 {
				continue
			}
			if n := r.replicas(ls.load, ls.intervals[cursor[k]].Intent); n > 0 {
				running[ls.load] = n
			}
		}
		seg := Segment{From: at, To: end, Running: running}
		r.place(ctx, &seg)
		r.check(&seg)
		r.recordFallbacks(seg)
		r.out.Segments = append(r.out.Segments, seg)
	}
}

// models are the models with capacity or demand, sorted.
func (r *run) models() []string {
	set := map[string]bool{}
	for m := range r.out.Capacity {
		set[m] = true
	}
	for _, s := range r.out.Segments {
		for m, n := range s.Demand {
			if n > 0 {
				set[m] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// windowsOf returns the windows that set some target's intent in tl, one
// band per (window, stretch), merged across targets.
func windowsOf(sched string, tl *schedule.Timeline) []Window {
	seen := map[Window]bool{}
	var out []Window
	for _, iv := range tl.Intervals {
		if iv.Source == schedule.SourceDefault {
			continue
		}
		w := Window{Schedule: sched, Name: iv.Source, From: iv.Start, To: iv.End}
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// noteStartOrder records the order of the acquire steps of s's
// transitions: the controller runs them one after another, so the
// scheduler places their pods in that order.
func (r *run) noteStartOrder(s *Schedule, tl *schedule.Timeline) {
	for _, tr := range tl.Transitions {
		at := tr.At.UnixNano()
		if r.startOrder[at] == nil {
			r.startOrder[at] = map[string]int{}
		}
		for _, st := range tr.Steps {
			if l := s.Targets[st.Target]; l != nil && st.Action != schedule.ActionStop {
				if _, seen := r.startOrder[at][l.Name]; !seen {
					r.startOrder[at][l.Name] = len(r.startOrder[at])
				}
			}
		}
	}
}
