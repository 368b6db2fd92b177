package advisor

import (
	"sort"
)

// index is the snapshot arranged for the search.
type index struct {
	snap    *Snapshot
	nodes   []string
	byNode  map[string][]*Device
	byID    map[string]*Device
	running map[string]*Workload
	// onNode lists the running workloads holding devices of each node.
	onNode map[string][]*Workload
	// used counts each namespace's held devices per model.
	used map[string]map[string]int
}

func newIndex(s *Snapshot) *index {
	ix := &index{snap: s, byNode: map[string][]*Device{}, byID: map[string]*Device{}, running: map[string]*Workload{}, onNode: map[string][]*Workload{}, used: map[string]map[string]int{}}
	for i := range s.Devices {
		d := &s.Devices[i]
		if _, ok := ix.byNode[d.Node]; !ok {
			ix.nodes = append(ix.nodes, d.Node)
		}
		ix.byNode[d.Node] = append(ix.byNode[d.Node], d)
		ix.byID[d.ID] = d
	}
	sort.Strings(ix.nodes)
	for _, n := range ix.nodes {
		sort.Slice(ix.byNode[n], func(i, j int) bool { return ix.byNode[n][i].ID < ix.byNode[n][j].ID })
	}
	for i := range s.Running {
		w := &s.Running[i]
		ix.running[w.Key] = w
		seen := map[string]bool{}
		for _, id := range w.Held {
			if d, ok := ix.byID[id]; ok {
				ix.addUse(w.Namespace, d.Model, 1)
				if !seen[d.Node] {
					seen[d.Node] = true
					ix.onNode[d.Node] = append(ix.onNode[d.Node], w)
				}
			}
		}
	}
	return ix
}

func (ix *index) addUse(ns, model string, n int) {
	if ix.used[ns] == nil {
		ix.used[ns] = map[string]int{}
	}
	ix.used[ns][model] += n
}

// world is one hypothetical state of the pool: which devices are free,
// which blocked devices are unblocked, and each namespace's usage. free
// holds only what differs from the snapshot (a device free when no one
// holds it), so that a world is cheap to make and copy on a large pool.
type world struct {
	ix        *index
	free      map[string]bool
	unblocked map[string]bool
	used      map[string]map[string]int
	// noQuota ignores the limits (to tell a quota block apart).
	noQuota bool
}

func (ix *index) now() *world {
	w := &world{ix: ix, free: map[string]bool{}, unblocked: map[string]bool{}, used: map[string]map[string]int{}}
	for ns, m := range ix.used {
		w.used[ns] = map[string]int{}
		for k, v := range m {
			w.used[ns][k] = v
		}
	}
	return w
}

func (w *world) clone() *world {
	c := &world{ix: w.ix, free: make(map[string]bool, len(w.free)), unblocked: map[string]bool{}, used: map[string]map[string]int{}, noQuota: w.noQuota}
	for k, v := range w.free {
		c.free[k] = v
	}
	for k, v := range w.unblocked {
		c.unblocked[k] = v
	}
	for ns, m := range w.used {
		c.used[ns] = map[string]int{}
		for k, v := range m {
			c.used[ns][k] = v
		}
	}
	return c
}

// release frees what a running workload holds and returns its quota.
func (w *world) release(r *Workload) {
	for _, id := range r.Held {
		if d, ok := w.ix.byID[id]; ok {
			w.free[id] = true
			w.used[r.Namespace][d.Model]--
		}
	}
}

func (w *world) quotaAllows(ns, model string, n int) bool {
	if w.noQuota {
		return true
	}
	limit, ok := w.ix.snap.Limits[ns][model]
	if !ok {
		return true
	}
	return w.used[ns][model]+n <= limit
}

func (w *world) take(ns string, ids []string, model string) {
	for _, id := range ids {
		w.free[id] = false
	}
	if w.used[ns] == nil {
		w.used[ns] = map[string]int{}
	}
	w.used[ns][model] += len(ids)
}

func (w *world) untake(ns string, ids []string, model string) {
	for _, id := range ids {
		w.free[id] = true
	}
	w.used[ns][model] -= len(ids)
}

// place finds where every group of wl lands in w, trying nodes in name
// order and each request's tiers in order, backtracking over both. avoid
// are devices the workload may not land on (those it is moved off). On
// success w holds the placement and it is returned.
func (w *world) place(wl *Workload, avoid map[string]bool) ([]Placed, bool) {
	var out []Placed
	var rec func(g, r int, node string) bool
	rec = func(g, r int, node string) bool {
		if g == len(wl.Groups) {
			return true
		}
		grp := &wl.Groups[g]
		if r == len(grp.Requests) {
			return rec(g+1, 0, "")
		}
		nodes := []string{node}
		if r == 0 {
			nodes = w.ix.allowed(grp)
		}
		for _, n := range nodes {
			for _, t := range grp.Requests[r].Tiers {
				ids := w.pick(n, &t, avoid)
				if ids == nil || !w.quotaAllows(wl.Namespace, t.Model, len(ids)) {
					continue
				}
				w.take(wl.Namespace, ids, t.Model)
				out = append(out, Placed{Pods: grp.Pods, Node: n, Devices: ids, Model: t.Model})
				if rec(g, r+1, n) {
					return true
				}
				out = out[:len(out)-1]
				w.untake(wl.Namespace, ids, t.Model)
			}
		}
		return false
	}
	if !rec(0, 0, "") {
		return nil, false
	}
	return out, true
}

// allowed lists the nodes a group may use, in name order.
func (ix *index) allowed(g *Group) []string {
	if len(g.Nodes) == 0 {
		return ix.nodes
	}
	var out []string
	for _, n := range g.Nodes {
		if _, ok := ix.byNode[n]; ok {
			out = appendUnique(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// pick returns the first t.Count free devices of node that t may take, or nil.
func (w *world) pick(node string, t *Tier, avoid map[string]bool) []string {
	var ids []string
	for _, d := range w.ix.byNode[node] {
		if !w.isFree(d) || avoid[d.ID] || !w.accepts(t, d.ID) {
			continue
		}
		ids = append(ids, d.ID)
		if len(ids) == t.Count {
			return ids
		}
	}
	return nil
}

func (w *world) isFree(d *Device) bool {
	if f, ok := w.free[d.ID]; ok {
		return f
	}
	return d.Holder == ""
}

func (w *world) accepts(t *Tier, id string) bool {
	if t.Devices[id] {
		return true
	}
	_, blocked := t.Blocked[id]
	return blocked && w.unblocked[id]
}

// fits reports whether wl fits in a copy of w.
func (w *world) fits(wl *Workload) ([]Placed, bool) {
	return w.clone().place(wl, nil)
}
