package reclaim

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// A reclaim gives a tenant GPUs its guarantee covers by evicting other
// tenants' borrowers. The plan is made on the advisor's snapshot:
//
//   - the waiting unit (the pod, or its whole gang) is covered for a model
//     when every request has a tier of that model and the tenant's usage
//     plus the unit's need stays within its guarantee; the unit is then
//     planned on those tiers alone;
//   - the candidates are other tenants' running workloads with a pod that
//     carries the borrower mark for that model, lowest priority first, then
//     newest; a workload (a gang whole) is taken only while its tenant keeps
//     at least its guarantee; every other workload is fixed;
//   - the shortest prefix of that order whose release lets the unit fit is
//     handed to the advisor's move search, which picks the fewest GPUs to
//     disturb among it (and respects PodDisruptionBudgets).

// victim is one workload a reclaim evicts.
type victim struct {
	Key       string
	Namespace string
	Pods      []*v1.Pod
	GPUs      int
	// TenantUsed and TenantGuaranteed are its tenant's numbers for the
	// model before the reclaim.
	TenantUsed, TenantGuaranteed int
	// Priority is its priority (a preemption within a tenant).
	Priority int32
}

// plan is a reclaim for one waiting unit.
type plan struct {
	Model string
	// Need is what the unit asks of the model; Used and Guaranteed are its
	// tenant's numbers.
	Need, Used, Guaranteed int
	Victims                []victim
	Nodes                  []string
}

// noPlan says why no reclaim applies; "" when the unit is not covered by
// a guarantee (the caller falls back to priority preemption).
type noPlan string

// coverage returns the model whose guarantee covers unit, the unit
// restricted to that model's tiers, and its need.
func coverage(table *gpuquota.Table, unit *advisor.Workload, used map[string]map[string]int) (string, *advisor.Workload, int, bool) {
	models := map[string]bool{}
	for _, g := range unit.Groups {
		for _, r := range g.Requests {
			for _, t := range r.Tiers {
				models[t.Model] = true
			}
		}
	}
	names := make([]string, 0, len(models))
	for m := range models {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		terms, ok := table.Terms(unit.Namespace, m)
		if !ok || terms.Guaranteed == 0 {
			continue
		}
		restricted, need, ok := onModel(unit, m)
		if ok && terms.Covers(used[unit.Namespace][m], need) {
			return m, restricted, need, true
		}
	}
	return "", nil, 0, false
}

// onModel is unit with every request narrowed to its first tier of model;
// false when some request has none.
func onModel(unit *advisor.Workload, model string) (*advisor.Workload, int, bool) {
	out := *unit
	out.Groups = make([]advisor.Group, len(unit.Groups))
	need := 0
	for gi, g := range unit.Groups {
		out.Groups[gi] = g
		out.Groups[gi].Requests = make([]advisor.Request, len(g.Requests))
		for ri, r := range g.Requests {
			found := false
			for _, t := range r.Tiers {
				if t.Model == model {
					out.Groups[gi].Requests[ri] = advisor.Request{Name: r.Name, Tiers: []advisor.Tier{t}}
					need += t.Count
					found = true
					break
				}
			}
			if !found {
				return nil, 0, false
			}
		}
	}
	return &out, need, true
}

// usedByTenant counts the devices each namespace's running workloads hold,
// per model.
func usedByTenant(snap *advisor.Snapshot) map[string]map[string]int {
	model := map[string]string{}
	for _, d := range snap.Devices {
		model[d.ID] = d.Model
	}
	out := map[string]map[string]int{}
	for _, w := range snap.Running {
		for _, id := range w.Held {
			if out[w.Namespace] == nil {
				out[w.Namespace] = map[string]int{}
			}
			out[w.Namespace][model[id]]++
		}
	}
	return out
}

// candidate is a running workload a reclaim may evict.
type candidate struct {
	w        *advisor.Workload
	pods     []*v1.Pod
	gpus     int
	newest   int64 // the latest creation time among its pods, Unix nanos
	priority int32
}

// candidates are the other tenants' workloads with a borrower of model,
// in reclaim order: lowest priority first, then newest (by creation time,
// which has a resolution of one second, then by key, last first).
func candidates(snap *advisor.Snapshot, pods map[string]*v1.Pod, unit *advisor.Workload, model string) []candidate {
	modelOf := map[string]string{}
	for _, d := range snap.Devices {
		modelOf[d.ID] = d.Model
	}
	var out []candidate
	for i := range snap.Running {
		w := &snap.Running[i]
		if w.Namespace == unit.Namespace || w.Fixed != "" {
			continue
		}
		c := candidate{w: w, priority: w.Priority}
		borrower := false
		for _, g := range w.Groups {
			for _, k := range g.Pods {
				p := pods[k]
				if p == nil {
					continue
				}
				c.pods = append(c.pods, p)
				c.newest = max(c.newest, p.CreationTimestamp.UnixNano())
				if v, ok := p.Annotations[gpuv1.BorrowedAnnotation]; ok && strings.Contains(","+v, ","+model+"=") {
					borrower = true
				}
			}
		}
		for _, id := range w.Held {
			if modelOf[id] == model {
				c.gpus++
			}
		}
		if borrower && c.gpus > 0 {
			out = append(out, c)
		}
	}
	sortReclaimOrder(out)
	return out
}

// sortReclaimOrder orders candidates lowest priority first, then newest.
func sortReclaimOrder(out []candidate) {
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.priority != b.priority:
			return a.priority < b.priority
		case a.newest != b.newest:
			return a.newest > b.newest
		default:
			// Created in the same second: the later name first, as the
			// replicas and ranks of one workload are numbered in order.
			return a.w.Key > b.w.Key
		}
	})
}

// makePlan plans a reclaim for unit, or says why there is none.
func makePlan(table *gpuquota.Table, snap *advisor.Snapshot, pods map[string]*v1.Pod, unit *advisor.Workload, maxChecks int) (*plan, noPlan) {
	used := usedByTenant(snap)
	model, restricted, need, ok := coverage(table, unit, used)
	if !ok {
		return nil, ""
	}
	p := &plan{Model: model, Need: need, Used: used[unit.Namespace][model]}
	terms, _ := table.Terms(unit.Namespace, model)
	p.Guaranteed = terms.Guaranteed
	if _, fits := advisorFits(snap, restricted); fits {
		return nil, noPlan(fmt.Sprintf("%s's guarantee covers it and %d %s are free: no reclaim needed", unit.Namespace, need, model))
	}
	taken := map[string]int{}
	var chosen []candidate
	for _, c := range candidates(snap, pods, unit, model) {
		ns := c.w.Namespace
		theirs, _ := table.TermsOrDefault(ns, model)
		if taken[ns]+c.gpus > theirs.Reclaimable(used[ns][model]) {
			continue // would take the tenant below its guarantee
		}
		taken[ns] += c.gpus
		chosen = append(chosen, c)
		opt, ok := moveWithin(snap, restricted, chosen, maxChecks)
		if !ok {
			continue
		}
		byKey := map[string]candidate{}
		for _, c := range chosen {
			byKey[c.w.Key] = c
		}
		for _, st := range opt.Steps {
			c := byKey[st.Workload]
			theirs, _ := table.TermsOrDefault(c.w.Namespace, model)
			p.Victims = append(p.Victims, victim{Key: c.w.Key, Namespace: c.w.Namespace, Pods: c.pods, GPUs: c.gpus,
				TenantUsed: used[c.w.Namespace][model], TenantGuaranteed: theirs.Guaranteed})
		}
		for _, pl := range opt.Placement {
			p.Nodes = append(p.Nodes, pl.Node)
		}
		return p, ""
	}
	return nil, noPlan(fmt.Sprintf("%s's guarantee covers %d %s, but evicting every borrower that other tenants can spare would not make room", unit.Namespace, need, model))
}

// advisorFits reports whether unit fits the snapshot as it is.
func advisorFits(snap *advisor.Snapshot, unit *advisor.Workload) (advisor.Advice, bool) {
	a := advisor.Advise(snap, unit, advisor.Options{MaxChecks: 1, MaxPlans: 1})
	return a, len(a.Options) == 0 && !a.Truncated
}

// moveWithin asks the advisor for the cheapest move plan that disturbs
// only chosen; false when none lets unit fit.
func moveWithin(snap *advisor.Snapshot, unit *advisor.Workload, chosen []candidate, maxChecks int) (advisor.Option, bool) {
	allowed := map[string]bool{}
	for _, c := range chosen {
		allowed[c.w.Key] = true
	}
	s := *snap
	s.Running = make([]advisor.Workload, len(snap.Running))
	for i, w := range snap.Running {
		s.Running[i] = w
		if !allowed[w.Key] && w.Fixed == "" {
			s.Running[i].Fixed = "not a borrower this reclaim may take"
		}
	}
	s.Releases = nil
	a := advisor.Advise(&s, unit, advisor.Options{MaxChecks: maxChecks, MaxPlans: 1})
	for _, o := range a.Options {
		if o.Kind == advisor.KindMove {
			return o, true
		}
	}
	return advisor.Option{}, false
}

// makePriorityPlan plans a preemption by priority within unit's own
// tenant: the tenant's running workloads of lower priority, lowest first,
// then newest; the shortest prefix that lets unit fit, narrowed by the
// advisor to the fewest GPUs. nil when none does.
func makePriorityPlan(snap *advisor.Snapshot, pods map[string]*v1.Pod, unit *advisor.Workload, maxChecks int) *plan {
	var cands []candidate
	for i := range snap.Running {
		w := &snap.Running[i]
		if w.Namespace != unit.Namespace || w.Priority >= unit.Priority || w.Fixed != "" || len(w.Held) == 0 {
			continue
		}
		c := candidate{w: w, priority: w.Priority, gpus: len(w.Held)}
		for _, g := range w.Groups {
			for _, k := range g.Pods {
				if p := pods[k]; p != nil {
					c.pods = append(c.pods, p)
					c.newest = max(c.newest, p.CreationTimestamp.UnixNano())
				}
			}
		}
		cands = append(cands, c)
	}
	sortReclaimOrder(cands)
	var chosen []candidate
	for _, c := range cands {
		chosen = append(chosen, c)
		opt, ok := moveWithin(snap, unit, chosen, maxChecks)
		if !ok {
			continue
		}
		byKey := map[string]candidate{}
		for _, c := range chosen {
			byKey[c.w.Key] = c
		}
		p := &plan{}
		for _, st := range opt.Steps {
			c := byKey[st.Workload]
			p.Victims = append(p.Victims, victim{Key: c.w.Key, Namespace: c.w.Namespace, Pods: c.pods, GPUs: c.gpus, Priority: c.priority})
		}
		return p
	}
	return nil
}
