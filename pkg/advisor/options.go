package advisor

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// waitOption is the first release after which the unit fits: the
// transitions' releases (and what they start first) and reservation ends
// are applied in time order.
func waitOption(ix *index, unit *Workload) (Option, bool) {
	w := ix.now()
	for _, r := range ix.snap.Releases {
		for _, k := range r.Workloads {
			if rw := ix.running[k]; rw != nil {
				w.release(rw)
			}
		}
		for _, id := range r.Unblocks {
			w.unblock(id)
		}
		if placed, ok := w.fits(unit); ok {
			at := r.At
			return Option{Kind: KindWait, At: &at, Source: r.Source, Placement: placed,
				Summary: fmt.Sprintf("wait until %s: %s frees capacity → fits on %s", at.UTC().Format(time.RFC3339), r.Source, placedNodes(placed))}, true
		}
	}
	return Option{}, false
}

// quotaOption is the limit change that admits the unit when it fits on
// the free devices now and only its namespace's limits keep it out.
func quotaOption(ix *index, unit *Workload) (Option, bool) {
	w := ix.now()
	w.noQuota = true
	placed, ok := w.fits(unit)
	if !ok {
		return Option{}, false
	}
	need := map[string]int{}
	for _, p := range placed {
		need[p.Model] += len(p.Devices)
	}
	o := Option{Kind: KindQuota, Placement: placed}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(need)) {
		limit, limited := ix.snap.Limits[unit.Namespace][m]
		used := ix.used[unit.Namespace][m]
		if !limited || used+need[m] <= limit {
			continue
		}
		o.Quota = &QuotaChange{Namespace: unit.Namespace, Model: m, From: limit, To: used + need[m]}
		parts = append(parts, fmt.Sprintf("%s %s limit %d → %d (holds %d, needs %d)", unit.Namespace, m, limit, used+need[m], used, need[m]))
	}
	if o.Quota == nil {
		return Option{}, false
	}
	o.Summary = strings.Join(parts, "; ") + " → fits on " + placedNodes(placed)
	return o, true
}

// tierOptions are the models, not among the unit's tiers, that its claims
// could accept if widened and that are free now.
func tierOptions(ix *index, unit *Workload) []Option {
	asked := map[string]bool{}
	for _, g := range unit.Groups {
		for _, r := range g.Requests {
			for _, t := range r.Tiers {
				asked[t.Model] = true
			}
		}
	}
	var out []Option
	for _, m := range ix.snap.Models {
		if asked[m.Model] || m.Model == "" {
			continue
		}
		widened := *unit
		widened.Groups = make([]Group, len(unit.Groups))
		for i, g := range unit.Groups {
			g.Requests = make([]Request, len(unit.Groups[i].Requests))
			for j, r := range unit.Groups[i].Requests {
				t := m
				t.Count = r.Tiers[0].Count
				t.Name = strings.ToLower(m.Model)
				r.Tiers = append(append([]Tier(nil), r.Tiers...), t)
				g.Requests[j] = r
			}
			widened.Groups[i] = g
		}
		if placed, ok := ix.now().fits(&widened); ok {
			out = append(out, Option{Kind: KindTier, Model: m.Model, Placement: placed,
				Summary: fmt.Sprintf("accept %s as another tier: free now on %s → fits without disturbing anyone", m.Model, placedNodes(placed))})
		}
	}
	return out
}

// noneOption says, node by node, what forbids the unit there: the
// workloads that would have to make room and the constraint that keeps
// each in place, or the devices the node lacks.
func noneOption(ix *index, unit *Workload) Option {
	o := Option{Kind: KindNone}
	for _, n := range ix.nodes {
		u := restricted(unit, n)
		if len(ix.allowed(&unit.Groups[0])) > 0 && !contains(ix.allowed(&unit.Groups[0]), n) {
			o.Constraints = append(o.Constraints, fmt.Sprintf("%s: not allowed by %s's node selector", n, unit.Key))
			continue
		}
		w := ix.now()
		w.noQuota = true
		holders := ix.onNode[n]
		for _, r := range holders {
			w.release(r)
		}
		if _, ok := w.fits(u); !ok {
			o.Constraints = append(o.Constraints, fmt.Sprintf("%s: %s", n, lacks(ix, unit, n)))
			continue
		}
		var why []string
		for _, r := range holders {
			if c := constraintOf(ix, r); c != "" {
				why = append(why, c)
			}
		}
		if len(why) == 0 {
			why = append(why, fmt.Sprintf("%s's quota (%s)", unit.Namespace, limitsOf(ix, unit.Namespace)))
		}
		o.Constraints = append(o.Constraints, fmt.Sprintf("%s: %s", n, strings.Join(why, "; ")))
	}
	o.Summary = "no change within policy admits it: " + strings.Join(o.Constraints, " | ")
	return o
}

// constraintOf says why a running workload may not make room, or "".
func constraintOf(ix *index, r *Workload) string {
	if r.Fixed != "" {
		return fmt.Sprintf("%s may not be disturbed: %s", r.Key, r.Fixed)
	}
	for _, b := range slices.Sorted(maps.Keys(r.Budgets)) {
		if r.Budgets[b] > ix.snap.Budgets[b] {
			return fmt.Sprintf("%s is protected by PodDisruptionBudget %s (%d disruptions allowed, moving it needs %d)", r.Key, b, ix.snap.Budgets[b], r.Budgets[b])
		}
	}
	return ""
}

// lacks says what node n lacks for the unit even with every holder gone.
func lacks(ix *index, unit *Workload, n string) string {
	var parts []string
	for _, g := range unit.Groups {
		for _, r := range g.Requests {
			for _, t := range r.Tiers {
				match, blocked := 0, map[string]int{}
				for _, d := range ix.byNode[n] {
					if t.Devices[d.ID] {
						match++
					} else if why, ok := t.Blocked[d.ID]; ok {
						blocked[why]++
					}
				}
				p := fmt.Sprintf("%d of %d %s usable", match, t.Count, tierName(t))
				for _, why := range slices.Sorted(maps.Keys(blocked)) {
					p += fmt.Sprintf(", %d %s", blocked[why], why)
				}
				parts = append(parts, p)
			}
		}
	}
	return "too few GPUs even if every holder left (" + strings.Join(parts, "; ") + ")"
}

func tierName(t Tier) string {
	if t.Model != "" {
		return t.Model
	}
	return t.Name
}

func limitsOf(ix *index, ns string) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(ix.snap.Limits[ns])) {
		parts = append(parts, fmt.Sprintf("%s holds %d of %d %s", ns, ix.used[ns][m], ix.snap.Limits[ns][m], m))
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, ", ")
}

func contains(s []string, v string) bool {
	i := sort.SearchStrings(s, v)
	return i < len(s) && s[i] == v
}
