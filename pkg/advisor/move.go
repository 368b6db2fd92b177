package advisor

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// plan is a set of running workloads whose devices a move plan frees.
type plan struct {
	keys        []string // sorted
	node        string   // where a one-group unit lands, "" otherwise
	gpus        int
	maxPriority int32
	tenants     int
}

// less orders plans: fewest GPUs disturbed, then lowest priority, then
// fewest tenants, then by node and name so that the order is stable.
func (p plan) less(q plan) bool {
	switch {
	case p.gpus != q.gpus:
		return p.gpus < q.gpus
	case p.maxPriority != q.maxPriority:
		return p.maxPriority < q.maxPriority
	case p.tenants != q.tenants:
		return p.tenants < q.tenants
	case p.node != q.node:
		return p.node < q.node
	default:
		return strings.Join(p.keys, ",") < strings.Join(q.keys, ",")
	}
}

func planOf(ws []*Workload) plan {
	p := plan{maxPriority: -1 << 31}
	ns := map[string]bool{}
	for _, w := range ws {
		p.keys = append(p.keys, w.Key)
		p.gpus += len(w.Held)
		p.maxPriority = max(p.maxPriority, w.Priority)
		ns[w.Namespace] = true
	}
	sort.Strings(p.keys)
	p.tenants = len(ns)
	return p
}

// searcher runs the bounded move search of one Advise call.
type searcher struct {
	ix        *index
	unit      *Workload
	maxChecks int
	checks    int
	truncated bool
	// world is the state the checks reuse (scratch).
	world *world
}

// candidates are the running workloads, on nodes, that hold a device some
// tier of the unit accepts and that a plan may disturb, cheapest first.
func (s *searcher) candidates(nodes map[string]bool) []*Workload {
	var out []*Workload
	seen := map[string]bool{}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		for _, w := range s.candidatesOn(n) {
			if !seen[w.Key] {
				seen[w.Key] = true
				out = append(out, w)
			}
		}
	}
	sortCandidates(out)
	return out
}

// candidatesOn are the candidates that hold such a device on node n,
// cheapest first.
func (s *searcher) candidatesOn(n string) []*Workload {
	var out []*Workload
	for _, w := range s.ix.onNode[n] {
		if w.Fixed != "" {
			continue
		}
		for _, id := range w.Held {
			if d := s.ix.byID[id]; d != nil && d.Node == n && s.accepts(id) {
				out = append(out, w)
				break
			}
		}
	}
	sortCandidates(out)
	return out
}

// sortCandidates orders workloads fewest GPUs first, then lowest
// priority, then by name.
func sortCandidates(ws []*Workload) {
	sort.Slice(ws, func(i, j int) bool {
		if len(ws[i].Held) != len(ws[j].Held) {
			return len(ws[i].Held) < len(ws[j].Held)
		}
		if ws[i].Priority != ws[j].Priority {
			return ws[i].Priority < ws[j].Priority
		}
		return ws[i].Key < ws[j].Key
	})
}

// accepts reports whether some tier of the unit accepts device id.
func (s *searcher) accepts(id string) bool {
	for gi := range s.unit.Groups {
		for ri := range s.unit.Groups[gi].Requests {
			for ti := range s.unit.Groups[gi].Requests[ri].Tiers {
				if s.unit.Groups[gi].Requests[ri].Tiers[ti].Devices[id] {
					return true
				}
			}
		}
	}
	return false
}

// best finds the cheapest set of cands whose release lets unit (restricted
// to nodes by the caller) fit. It stops early once maxChecks placements
// were tried (truncated). Every candidate holds a device, so adding one to
// a set disturbs more GPUs: a set as costly as the best found so far is
// not extended, and a set that could not beat it is not checked.
func (s *searcher) best(unit *Workload, cands []*Workload) (plan, bool) {
	var best plan
	found := false
	var chosen []*Workload
	use := map[string]int{} // the budgets chosen uses
	w := s.scratch()
	var rec func(i, gpus int)
	rec = func(i, gpus int) {
		if s.checks >= s.maxChecks {
			s.truncated = true
			return
		}
		if found && gpus > best.gpus {
			return
		}
		if len(chosen) > 0 {
			p := planOf(chosen)
			if found && !p.less(best) {
				return // neither it nor a superset beats best
			}
			s.checks++
			w.reset()
			for _, c := range chosen {
				w.release(c)
			}
			if _, ok := w.place(unit, nil); ok {
				best, found = p, true
				return // a superset only disturbs more
			}
		}
		for j := i; j < len(cands); j++ {
			c := cands[j]
			allowed := true
			for b, n := range c.Budgets {
				use[b] += n
				allowed = allowed && use[b] <= s.ix.snap.Budgets[b]
			}
			if allowed {
				chosen = append(chosen, c)
				rec(j+1, gpus+len(c.Held))
				chosen = chosen[:len(chosen)-1]
			}
			for b, n := range c.Budgets {
				use[b] -= n
			}
			if s.truncated {
				return
			}
		}
	}
	rec(0, 0)
	return best, found
}

// scratch is the world the search's checks reuse.
func (s *searcher) scratch() *world {
	if s.world == nil {
		s.world = s.ix.now()
		s.world.probe = true
	}
	return s.world
}

// restricted returns a copy of unit whose groups may use only node.
func restricted(unit *Workload, node string) *Workload {
	c := *unit
	c.Groups = make([]Group, len(unit.Groups))
	for i, g := range unit.Groups {
		g.Nodes = []string{node}
		c.Groups[i] = g
	}
	return &c
}

// movePlans returns the cheapest move plans, at most max. A unit of one
// group is searched node by node (it lands on one node, so only what holds
// that node's devices matters); a unit of several groups is searched over
// the whole pool.
func (s *searcher) movePlans(max int) []plan {
	var plans []plan
	if len(s.unit.Groups) == 1 {
		// Nodes in the order of the cheapest plan they could give; once
		// max plans are found, a node whose bound (with its name, the
		// last tie-break) is past the last of them cannot enter the list.
		for _, nb := range s.nodeBounds() {
			if s.truncated {
				break
			}
			if len(plans) >= max {
				sort.Slice(plans, func(i, j int) bool { return plans[i].less(plans[j]) })
				plans = plans[:max]
				if !nb.bound.less(plans[max-1]) {
					break
				}
			}
			u := restricted(s.unit, nb.bound.node)
			if p, ok := s.best(u, nb.cands); ok {
				p.node = nb.bound.node
				plans = append(plans, p)
			}
		}
	} else {
		nodes := map[string]bool{}
		for i := range s.unit.Groups {
			for _, n := range s.ix.allowed(&s.unit.Groups[i]) {
				nodes[n] = true
			}
		}
		if p, ok := s.best(s.unit, s.candidates(nodes)); ok {
			plans = append(plans, p)
		}
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].less(plans[j]) })
	if len(plans) > max {
		plans = plans[:max]
	}
	return plans
}

// option turns a plan into steps: the freed devices go to the unit, then
// each disturbed workload is moved where its own tiers, node constraints
// and quota find room, or evicted when none does.
func (s *searcher) option(p plan) Option {
	w := s.ix.now()
	ws := make([]*Workload, len(p.keys))
	for i, k := range p.keys {
		ws[i] = s.ix.running[k]
		w.release(ws[i])
	}
	placed, _ := w.place(s.unit, nil)
	o := Option{Kind: KindMove, GPUs: p.gpus, MaxPriority: p.maxPriority, Tenants: p.tenants, Placement: placed}
	for _, r := range ws {
		st := Step{Workload: r.Key, Pods: r.pods(), GPUs: len(r.Held), Model: s.ix.model(r.Held), From: s.ix.nodesOf(r.Held), Budget: s.budgetNote(r)}
		switch {
		case r.Pinned != "":
			st.Action, st.Why = "evict", r.Pinned
		default:
			if to, ok := w.place(r, setOf(r.Held)); ok {
				st.Action = "move"
				for _, pl := range to {
					st.To = appendUnique(st.To, pl.Node)
				}
			} else {
				st.Action, st.Why = "evict", "no room elsewhere for its tiers within its quota"
			}
		}
		o.Steps = append(o.Steps, st)
	}
	o.Summary = moveSummary(o)
	return o
}

func (s *searcher) budgetNote(r *Workload) string {
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(r.Budgets)) {
		parts = append(parts, fmt.Sprintf("PodDisruptionBudget %s allows %d", b, s.ix.snap.Budgets[b]))
	}
	return strings.Join(parts, ", ")
}

func moveSummary(o Option) string {
	var parts []string
	for _, st := range o.Steps {
		var p string
		if st.Action == "move" {
			p = fmt.Sprintf("move %s (%d × %s) from %s to %s", st.Workload, st.GPUs, st.Model, strings.Join(st.From, ","), strings.Join(st.To, ","))
		} else {
			p = fmt.Sprintf("evict %s (%d × %s) on %s (%s)", st.Workload, st.GPUs, st.Model, strings.Join(st.From, ","), st.Why)
		}
		if st.Budget != "" {
			p += "; " + st.Budget
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("%s → fits on %s", strings.Join(parts, "; "), placedNodes(o.Placement))
}

// nodeBound is a node with the candidates on it and a bound no plan that
// places a one-group unit there can beat.
type nodeBound struct {
	bound plan
	cands []*Workload
}

// nodeBounds lists the nodes a one-group unit may use, best bound first.
// For a group of one request, a plan that lands it on a node with tier t
// frees there at least need (t's count less the free devices t accepts)
// devices that t accepts, all held by candidates; so it disturbs at least
// need GPUs, its highest priority is at least the lowest p for which the
// candidates of priority p or less hold need such devices, and it disturbs
// at least as many tenants as it takes, largest first, to hold need. Each
// part is the least over the tiers that could fit; the bound is no worse
// than any plan there in the order of plan.less. A node without enough
// accepted devices, free or held by candidates, is left out.
func (s *searcher) nodeBounds() []nodeBound {
	g := &s.unit.Groups[0]
	var out []nodeBound
	for _, n := range s.ix.allowed(g) {
		cands := s.candidatesOn(n)
		if len(cands) == 0 {
			continue
		}
		minPrio := int32(1<<31 - 1)
		for _, c := range cands {
			minPrio = min(minPrio, c.Priority)
		}
		b := plan{maxPriority: minPrio, tenants: 1, node: n}
		if len(g.Requests) == 1 {
			var possible bool
			if b, possible = s.tierBound(n, cands, g.Requests[0].Tiers); !possible {
				continue
			}
			b.node = n
		}
		out = append(out, nodeBound{bound: b, cands: cands})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bound.less(out[j].bound) })
	return out
}

// tierBound is the bound of nodeBounds on node n for a request with tiers;
// possible is false when no tier could fit there even with every candidate
// gone.
func (s *searcher) tierBound(n string, cands []*Workload, tiers []Tier) (plan, bool) {
	b := plan{gpus: 1 << 30, maxPriority: 1<<31 - 1, tenants: 1 << 30}
	possible := false
	held := make([]int, len(cands)) // devices of n the tier accepts, per candidate
	for ti := range tiers {
		t := &tiers[ti]
		free, total := 0, 0
		for _, d := range s.ix.byNode[n] {
			if t.Devices[d.ID] && d.Holder == "" {
				free++
			}
		}
		for ci, c := range cands {
			held[ci] = 0
			for _, id := range c.Held {
				if d := s.ix.byID[id]; d != nil && d.Node == n && t.Devices[id] {
					held[ci]++
				}
			}
			total += held[ci]
		}
		need := max(t.Count-free, 0)
		if free+total < t.Count {
			continue
		}
		possible = true
		b.gpus = min(b.gpus, need)
		b.maxPriority = min(b.maxPriority, prioBound(cands, held, need))
		b.tenants = min(b.tenants, tenantBound(cands, held, need))
	}
	return b, possible
}

// prioBound is the lowest priority p for which the candidates of priority
// p or less hold need of the devices counted in held (the lowest
// candidate priority when need is 0).
func prioBound(cands []*Workload, held []int, need int) int32 {
	if need <= 0 {
		p := cands[0].Priority
		for _, c := range cands {
			p = min(p, c.Priority)
		}
		return p
	}
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return cands[order[i]].Priority < cands[order[j]].Priority })
	got := 0
	for _, i := range order {
		got += held[i]
		if got >= need {
			return cands[i].Priority
		}
	}
	return cands[order[len(order)-1]].Priority
}

// tenantBound is the fewest namespaces whose candidates together hold
// need of the devices counted in held (at least 1).
func tenantBound(cands []*Workload, held []int, need int) int {
	if need <= 0 {
		return 1
	}
	var names []string
	var sums []int
	for i, c := range cands {
		k := 0
		for k < len(names) && names[k] != c.Namespace {
			k++
		}
		if k == len(names) {
			names = append(names, c.Namespace)
			sums = append(sums, 0)
		}
		sums[k] += held[i]
	}
	sort.Sort(sort.Reverse(sort.IntSlice(sums)))
	got := 0
	for k, v := range sums {
		got += v
		if got >= need {
			return k + 1
		}
	}
	return max(len(sums), 1)
}
