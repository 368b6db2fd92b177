package advisor

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomCase is a small random cluster (at most 4 nodes × 4 GPUs of two
// models), random running pods and gangs (some protected by budgets, some
// fixed) and one waiting pod or gang.
func randomCase(r *rand.Rand) (*Snapshot, *Workload) {
	models := []string{"H100", "A100"}
	nodes := map[string]string{}
	perNode := 1 + r.IntN(4)
	for i := range 1 + r.IntN(4) {
		nodes[fmt.Sprintf("n%d", i+1)] = models[r.IntN(2)]
	}
	c := newCluster(nodes, perNode)
	c.snap.Budgets = map[string]int{"pdb-0": r.IntN(2), "pdb-1": r.IntN(3)}
	free := map[string][]string{} // node -> free device IDs
	for _, d := range c.snap.Devices {
		free[d.Node] = append(free[d.Node], d.ID)
	}
	nodeNames := slices.Sorted(maps.Keys(nodes))
	for i := range r.IntN(8) {
		key := fmt.Sprintf("ns-%d/w-%d", i%3, i)
		w := Workload{Key: key, Namespace: fmt.Sprintf("ns-%d", i%3), Priority: int32(r.IntN(3))}
		members := 1 + r.IntN(2) // a gang of two moves whole
		for m := range members {
			n := nodeNames[r.IntN(len(nodeNames))]
			want := 1 + r.IntN(2)
			if len(free[n]) < want {
				continue
			}
			ids := free[n][:want]
			free[n] = free[n][want:]
			w.Held = append(w.Held, ids...)
			w.Groups = append(w.Groups, Group{Pods: []string{fmt.Sprintf("%s-%d", key, m)}, Requests: []Request{{Name: "gpu", Tiers: []Tier{c.tier(nodes[n], want)}}}})
			for _, id := range ids {
				for j := range c.snap.Devices {
					if c.snap.Devices[j].ID == id {
						c.snap.Devices[j].Holder = key
					}
				}
			}
		}
		if len(w.Held) == 0 {
			continue
		}
		switch r.IntN(6) {
		case 0:
			w.Budgets = map[string]int{"pdb-0": len(w.Groups)}
		case 1:
			w.Budgets = map[string]int{"pdb-1": len(w.Groups)}
		case 2:
			w.Fixed = "not managed by Rota"
		case 3:
			w.Pinned = "nodeSelector"
		}
		c.snap.Running = append(c.snap.Running, w)
	}
	unit := &Workload{Key: "wait/u", Namespace: "wait"}
	for g := range 1 + r.IntN(2) {
		var tiers []Tier
		n := 1 + r.IntN(perNode)
		for _, m := range r.Perm(2)[:1+r.IntN(2)] {
			tiers = append(tiers, c.tier(models[m], n))
		}
		unit.Groups = append(unit.Groups, Group{Pods: []string{fmt.Sprintf("wait/u-%d", g)}, Requests: []Request{{Name: "gpu", Tiers: tiers}}})
	}
	return c.snap, unit
}

// bruteFits is an independent check, by enumeration, that unit fits when
// the devices in gone are freed: every assignment of groups to nodes and
// of tiers to requests, counting free devices per node and model.
func bruteFits(s *Snapshot, unit *Workload, gone map[string]bool) bool {
	freeBy := map[[2]string]int{}
	var nodes []string
	seen := map[string]bool{}
	for _, d := range s.Devices {
		if !seen[d.Node] {
			seen[d.Node] = true
			nodes = append(nodes, d.Node)
		}
		if d.Holder == "" || gone[d.Holder] {
			freeBy[[2]string{d.Node, d.Model}]++
		}
	}
	var reqs []Request
	var groupOf []int
	for gi, g := range unit.Groups {
		for _, r := range g.Requests {
			reqs = append(reqs, r)
			groupOf = append(groupOf, gi)
		}
	}
	groupNode := make([]string, len(unit.Groups))
	var rec func(i int) bool
	rec = func(i int) bool {
		if i == len(reqs) {
			return true
		}
		g := groupOf[i]
		cands := nodes
		if groupNode[g] != "" {
			cands = []string{groupNode[g]}
		}
		for _, n := range cands {
			for _, t := range reqs[i].Tiers {
				k := [2]string{n, t.Model}
				if freeBy[k] < t.Count {
					continue
				}
				prev := groupNode[g]
				groupNode[g] = n
				freeBy[k] -= t.Count
				if rec(i + 1) {
					return true
				}
				freeBy[k] += t.Count
				groupNode[g] = prev
			}
		}
		return false
	}
	return rec(0)
}

// exhaustiveMin is the cheapest budget-respecting set of movable
// workloads whose release admits unit, in the advisor's order (fewest GPUs,
// then lowest priority, then fewest tenants); gpus is -1 when none does.
func exhaustiveMin(s *Snapshot, unit *Workload) (best plan) {
	var movable []*Workload
	for i := range s.Running {
		if s.Running[i].Fixed == "" {
			movable = append(movable, &s.Running[i])
		}
	}
	best.gpus = -1
	for mask := 1; mask < 1<<len(movable); mask++ {
		gone, use := map[string]bool{}, map[string]int{}
		var chosen []*Workload
		for i, w := range movable {
			if mask&(1<<i) != 0 {
				gone[w.Key] = true
				chosen = append(chosen, w)
				for b, n := range w.Budgets {
					use[b] += n
				}
			}
		}
		ok := true
		for b, n := range use {
			ok = ok && n <= s.Budgets[b]
		}
		p := planOf(chosen)
		if ok && (best.gpus < 0 || cheaper(p, best)) && bruteFits(s, unit, gone) {
			best = p
		}
	}
	return best
}

// cheaper compares plans by cost alone (GPUs, priority, tenants).
func cheaper(p, q plan) bool {
	p.node, q.node, p.keys, q.keys = "", "", nil, nil
	return p.less(q)
}

var (
	propertyCases = flag.Int("advisor.cases", 3000, "random clusters TestMovePlansAreMinimalAndAdmit checks")
	propertySeed  = flag.Uint64("advisor.seed", 19, "seed of TestMovePlansAreMinimalAndAdmit's clusters")
)

func TestMovePlansAreMinimalAndAdmit(t *testing.T) {
	cases := *propertyCases
	r := rand.New(rand.NewPCG(*propertySeed, 2026))
	var moves, nones, truncated int
	for i := range cases {
		snap, unit := randomCase(r)
		if bruteFits(snap, unit, nil) {
			continue
		}
		a := Advise(snap, unit, Options{MaxPlans: 5})
		if a.Truncated {
			truncated++
			continue
		}
		cheapest := exhaustiveMin(snap, unit)
		want := cheapest.gpus
		var plans []Option
		for _, o := range a.Options {
			if o.Kind == KindMove {
				plans = append(plans, o)
			}
		}
		if want < 0 {
			if len(plans) > 0 {
				t.Fatalf("case %d: exhaustive search finds no plan, advisor offers %q", i, plans[0].Summary)
			}
			if len(a.Options) != 1 || a.Options[0].Kind != KindNone {
				t.Fatalf("case %d: no plan exists but advice is %+v", i, a.Options)
			}
			nones++
			continue
		}
		if len(plans) == 0 {
			t.Fatalf("case %d: a plan disturbing %d GPUs exists, advisor offers none: %+v", i, want, a.Options)
		}
		if plans[0].GPUs != want || plans[0].MaxPriority != cheapest.maxPriority || plans[0].Tenants != cheapest.tenants {
			t.Fatalf("case %d: first plan disturbs %d GPUs up to priority %d of %d tenants, the cheapest disturbs %d up to %d of %d: %s",
				i, plans[0].GPUs, plans[0].MaxPriority, plans[0].Tenants, want, cheapest.maxPriority, cheapest.tenants, plans[0].Summary)
		}
		for _, p := range plans {
			gone, use := map[string]bool{}, map[string]int{}
			for _, st := range p.Steps {
				gone[st.Workload] = true
				for j := range snap.Running {
					w := &snap.Running[j]
					if w.Key != st.Workload {
						continue
					}
					if w.Fixed != "" {
						t.Fatalf("case %d: plan disturbs fixed %s", i, w.Key)
					}
					if w.Pinned != "" && st.Action == "move" {
						t.Fatalf("case %d: plan moves pinned %s", i, w.Key)
					}
					for b, n := range w.Budgets {
						use[b] += n
					}
				}
			}
			for b, n := range use {
				if n > snap.Budgets[b] {
					t.Fatalf("case %d: plan %q breaks budget %s (%d > %d)", i, p.Summary, b, n, snap.Budgets[b])
				}
			}
			if !bruteFits(snap, unit, gone) {
				t.Fatalf("case %d: plan %q does not admit the unit", i, p.Summary)
			}
			if p.GPUs < want {
				t.Fatalf("case %d: plan claims %d GPUs, below the minimum %d", i, p.GPUs, want)
			}
		}
		moves++
	}
	t.Logf("%d cases: %d with move plans, %d none, %d truncated", cases, moves, nones, truncated)
	if moves < cases/10 || nones < cases/20 {
		t.Errorf("the generator is too narrow: %d move cases, %d none cases", moves, nones)
	}
	if truncated > cases/100 {
		t.Errorf("%d searches truncated", truncated)
	}
}
