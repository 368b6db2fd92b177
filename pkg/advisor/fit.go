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
// which blocked devices are unblocked, and each namespace's usage. Each
// holds only what differs from the snapshot (a device is free when no one
// holds it; usage is the snapshot's plus used), and its maps are made on
// first write, so that a world is cheap to make, copy and reset on a large
// pool.
type world struct {
	ix        *index
	free      map[string]bool
	unblocked map[string]bool
	used      map[nsModel]int
	// noQuota ignores the limits (to tell a quota block apart).
	noQuota bool
	// probe: place only answers whether the workload fits, without
	// recording where (the move search's checks).
	probe bool
	// buf holds the devices picked by the placement in progress, a stack
	// that backtracking pops.
	buf []string
}

type nsModel struct{ ns, model string }

func (ix *index) now() *world {
	return &world{ix: ix}
}

func (w *world) clone() *world {
	c := &world{ix: w.ix, noQuota: w.noQuota}
	if len(w.free) > 0 {
		c.free = make(map[string]bool, len(w.free))
		for k, v := range w.free {
			c.free[k] = v
		}
	}
	if len(w.unblocked) > 0 {
		c.unblocked = make(map[string]bool, len(w.unblocked))
		for k, v := range w.unblocked {
			c.unblocked[k] = v
		}
	}
	if len(w.used) > 0 {
		c.used = make(map[nsModel]int, len(w.used))
		for k, v := range w.used {
			c.used[k] = v
		}
	}
	return c
}

// reset makes w the snapshot's state again, keeping its maps' storage.
func (w *world) reset() {
	clear(w.free)
	clear(w.unblocked)
	clear(w.used)
	w.buf = w.buf[:0]
}

func (w *world) setFree(id string, free bool) {
	if w.free == nil {
		w.free = map[string]bool{}
	}
	w.free[id] = free
}

func (w *world) unblock(id string) {
	if w.unblocked == nil {
		w.unblocked = map[string]bool{}
	}
	w.unblocked[id] = true
}

func (w *world) addUsed(ns, model string, n int) {
	if w.used == nil {
		w.used = map[nsModel]int{}
	}
	w.used[nsModel{ns, model}] += n
}

func (w *world) usedOf(ns, model string) int {
	return w.ix.used[ns][model] + w.used[nsModel{ns, model}]
}

// release frees what a running workload holds and returns its quota.
func (w *world) release(r *Workload) {
	for _, id := range r.Held {
		if d, ok := w.ix.byID[id]; ok {
			w.setFree(id, true)
			w.addUsed(r.Namespace, d.Model, -1)
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
	return w.usedOf(ns, model)+n <= limit
}

func (w *world) take(ns string, ids []string, model string) {
	for _, id := range ids {
		w.setFree(id, false)
	}
	w.addUsed(ns, model, len(ids))
}

func (w *world) untake(ns string, ids []string, model string) {
	for _, id := range ids {
		w.setFree(id, true)
	}
	w.addUsed(ns, model, -len(ids))
}

// place finds where every group of wl lands in w, trying nodes in name
// order and each request's tiers in order, backtracking over both. avoid
// are devices the workload may not land on (those it is moved off). On
// success w holds the placement and it is returned (nil for a probe).
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
			for ti := range grp.Requests[r].Tiers {
				t := &grp.Requests[r].Tiers[ti]
				start := len(w.buf)
				if !w.pick(n, t, avoid) || !w.quotaAllows(wl.Namespace, t.Model, t.Count) {
					w.buf = w.buf[:start]
					continue
				}
				ids := w.buf[start:]
				w.take(wl.Namespace, ids, t.Model)
				if !w.probe {
					out = append(out, Placed{Pods: grp.Pods, Node: n, Devices: append([]string(nil), ids...), Model: t.Model})
				}
				if rec(g, r+1, n) {
					return true
				}
				if !w.probe {
					out = out[:len(out)-1]
				}
				w.untake(wl.Namespace, ids, t.Model)
				w.buf = w.buf[:start]
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

// pick appends to w.buf the first t.Count free devices of node that t
// may take and reports whether there were that many.
func (w *world) pick(node string, t *Tier, avoid map[string]bool) bool {
	n := 0
	for _, d := range w.ix.byNode[node] {
		if !w.isFree(d) || avoid[d.ID] || !w.accepts(t, d.ID) {
			continue
		}
		w.buf = append(w.buf, d.ID)
		if n++; n == t.Count {
			return true
		}
	}
	return false
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
