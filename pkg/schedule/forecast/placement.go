package forecast

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// livePod is one pod of a load that the forecast follows from stretch to
// stretch, as the scheduler sees it: placed on a node, or waiting.
type livePod struct {
	load     string
	template int
	// at is where the pod runs; nil while it waits for room.
	at *preview.Placement
	// shortage and detail say why a waiting pod found no node.
	shortage, detail string
}

// placer follows the pods of every load over the stretches: a pod keeps
// its node for as long as its load runs it, a new or waiting pod goes
// where the capacity preview (the scheduler's ranking) puts it.
type placer struct {
	live map[string][]*livePod
}

// place brings the pods up to seg.Running (a load scaled down loses its
// waiting pods first, then its last placed ones), places the waiting ones
// (those that waited before first, then the workloads no schedule touches,
// then the targets in the order their transitions' steps start them, then
// the largest pods) and fills in seg's demand, per-node GPUs, fallbacks
// and unplaced pods.
func (r *run) place(ctx context.Context, seg *Segment) {
	var waiting, fresh []*livePod
	names := sets.List(sets.KeySet(r.placer.live).Union(sets.KeySet(seg.Running)))
	for _, name := range names {
		if r.unmatched[name] {
			delete(r.placer.live, name)
			continue
		}
		pods := r.resize(name, seg.Running[name])
		for _, p := range pods {
			if p.at == nil && p.shortage != "" {
				waiting = append(waiting, p)
			} else if p.at == nil {
				fresh = append(fresh, p)
			}
		}
	}
	order := r.startOrder[seg.From.UnixNano()]
	sort.SliceStable(fresh, func(i, j int) bool {
		a, b := fresh[i], fresh[j]
		if aa, ab := r.always(a.load), r.always(b.load); aa != ab {
			return aa
		}
		oa, inA := order[a.load]
		ob, inB := order[b.load]
		switch {
		case inA && inB && oa != ob:
			return oa < ob
		case inA != inB:
			return inA
		}
		return r.gpus(a) > r.gpus(b)
	})
	r.placeAll(ctx, groups(append(waiting, fresh...)))
	r.fill(seg)
}

// resize adds or removes pods of load so each pod template has the pods n
// replicas make, and returns the load's pods.
func (r *run) resize(name string, n int32) []*livePod {
	l := r.loads[name]
	var out []*livePod
	for i, d := range l.Replica {
		want := int(n) * d.Pods
		if len(d.PodClaims) == 0 {
			want = 0
		}
		var mine []*livePod
		for _, p := range r.placer.live[name] {
			if p.template == i {
				mine = append(mine, p)
			}
		}
		// The ReplicaSet controller deletes unscheduled pods first.
		sort.SliceStable(mine, func(a, b int) bool { return mine[a].at != nil && mine[b].at == nil })
		if len(mine) > want {
			mine = mine[:want]
		}
		for len(mine) < want {
			mine = append(mine, &livePod{load: name, template: i})
		}
		out = append(out, mine...)
	}
	if len(out) == 0 {
		delete(r.placer.live, name)
	} else {
		r.placer.live[name] = out
	}
	return out
}

// groups splits pods into runs of the same load and template.
func groups(pods []*livePod) [][]*livePod {
	var out [][]*livePod
	for _, p := range pods {
		if n := len(out); n > 0 && out[n-1][0].load == p.load && out[n-1][0].template == p.template {
			out[n-1] = append(out[n-1], p)
			continue
		}
		out = append(out, []*livePod{p})
	}
	return out
}

// placeAll places the groups' pods, in order, on top of the allocated
// claims and every pod placed before, in one preview. When the allocator
// refuses some load's claims, each group is placed on its own instead
// (placeGroup).
func (r *run) placeAll(ctx context.Context, groups [][]*livePod) {
	if len(groups) == 0 {
		return
	}
	demands := make([]preview.Demand, len(groups))
	for i, g := range groups {
		demands[i] = preview.Demand{PodClaims: r.loads[g[0].load].Replica[g[0].template].PodClaims, Pods: len(g)}
	}
	res, err := r.previewr.Check(ctx, r.previewInputs(), demands...)
	if err != nil {
		for _, g := range groups {
			r.placeGroup(ctx, g)
		}
		return
	}
	i := 0
	for _, g := range groups {
		r.settle(g, res.Pods[i:i+len(g)], res.Message)
		i += len(g)
	}
}

// placeGroup places pods of one load and template on top of the allocated
// claims and every pod placed so far. A load whose claims the allocator
// refuses (a selector it cannot evaluate) is said so in a note and from
// then on counted at first choice, never placed.
func (r *run) placeGroup(ctx context.Context, pods []*livePod) {
	load := pods[0].load
	d := preview.Demand{PodClaims: r.loads[load].Replica[pods[0].template].PodClaims, Pods: len(pods)}
	res, err := r.previewr.Check(ctx, r.previewInputs(), d)
	if err != nil {
		r.out.Notes = append(r.out.Notes, fmt.Sprintf("%s not placed per node: %v", load, err))
		r.unmatched[load] = true
		delete(r.placer.live, load)
		return
	}
	r.settle(pods, res.Pods, res.Message)
}

// settle records where the preview put pods; message is its answer, with
// the free GPUs per node, for those it could not place.
func (r *run) settle(pods []*livePod, at []preview.Placement, message string) {
	for i, p := range pods {
		if at[i].Node == "" {
			p.shortage = at[i].Shortage
			p.detail = fmt.Sprintf("a pod of %s (%d GPUs) fits on no node once the running workloads and the pods before it are placed; %s",
				p.load, r.gpus(p), message)
			continue
		}
		p.at, p.shortage, p.detail = &at[i], "", ""
	}
}

// previewInputs are the pool with the allocated claims and those of every
// placed pod.
func (r *run) previewInputs() preview.Inputs {
	if r.nodeList == nil {
		r.nodeList = r.nodes()
	}
	return preview.Inputs{Nodes: r.nodeList, Slices: r.in.Slices, Claims: r.claims(), Classes: r.in.Classes}
}

// claims are the allocated claims and those of every placed pod.
func (r *run) claims() []*resourceapi.ResourceClaim {
	out := slices.Clone(r.in.Allocated)
	for _, name := range slices.Sorted(maps.Keys(r.placer.live)) {
		for _, p := range r.placer.live[name] {
			if p.at != nil {
				out = append(out, p.at.Claims...)
			}
		}
	}
	return out
}

// gpus is what one pod of p's template asks for at first choice.
func (r *run) gpus(p *livePod) int {
	n := 0
	for _, c := range r.perPod[p.load][p.template] {
		n += c
	}
	return n
}

// fill sets seg's demand, loads, nodes, fallbacks and unplaced pods from
// the pods as placed.
func (r *run) fill(seg *Segment) {
	seg.Loads = map[string]map[string]int{}
	nodes := map[string]map[string]int{}
	for node, per := range r.fixedNodes {
		nodes[node] = maps.Clone(per)
	}
	add := func(m map[string]map[string]int, k, model string, n int) {
		if m[k] == nil {
			m[k] = map[string]int{}
		}
		m[k][model] += n
	}
	complete := true
	for _, name := range slices.Sorted(maps.Keys(seg.Running)) {
		if r.unmatched[name] {
			for i, per := range r.perPod[name] {
				for model, c := range per {
					add(seg.Loads, name, model, c*int(seg.Running[name])*r.loads[name].Replica[i].Pods)
				}
			}
			continue
		}
		fallbacks := map[Fallback]int{}
		unplaced := map[string]*Unplaced{}
		for _, p := range r.placer.live[name] {
			if p.at == nil {
				complete = false
				u := unplaced[p.shortage]
				if u == nil {
					u = &Unplaced{Load: name, GPUs: map[string]int{}, Reason: p.shortage, Detail: p.detail}
					unplaced[p.shortage] = u
				}
				u.Pods++
				for model, c := range r.perPod[name][p.template] {
					u.GPUs[model] += c
					add(seg.Loads, name, model, c)
				}
				continue
			}
			for _, dev := range p.at.Devices {
				add(seg.Loads, name, dev.Model, 1)
				add(nodes, p.at.Node, dev.Model, 1)
				preferred := r.prefer[name][p.template][requestKey(dev.Claim, dev.Request)]
				fb := Fallback{Load: name, Model: dev.Model, Preferred: preferred}
				switch {
				case dev.Tier > 0:
					fb.Tier = fmt.Sprintf("%d/%d %s", dev.Tier+1, dev.Tiers, dev.TierName)
				case dev.Model == preferred || preferred == "":
					continue
				}
				fallbacks[fb]++
			}
		}
		for _, fb := range slices.SortedFunc(maps.Keys(fallbacks), func(a, b Fallback) int {
			return strings.Compare(a.Model+"\x00"+a.Tier, b.Model+"\x00"+b.Tier)
		}) {
			fb.GPUs = fallbacks[fb]
			seg.Fallbacks = append(seg.Fallbacks, fb)
		}
		for _, reason := range []string{ReasonCount, ReasonFragmentation} {
			if u := unplaced[reason]; u != nil {
				seg.Unplaced = append(seg.Unplaced, *u)
			}
		}
	}
	seg.Demand = maps.Clone(r.fixed)
	if seg.Demand == nil {
		seg.Demand = map[string]int{}
	}
	for _, per := range seg.Loads {
		for model, n := range per {
			seg.Demand[model] += n
		}
	}
	if complete {
		seg.Nodes = nodes
	}
}

// nodes are the input's nodes, or one per node that publishes devices.
func (r *run) nodes() []*v1.Node {
	if len(r.in.Nodes) > 0 {
		return r.in.Nodes
	}
	names := sets.New[string]()
	for _, s := range r.in.Slices {
		if s.Spec.NodeName != nil {
			names.Insert(*s.Spec.NodeName)
		}
	}
	out := make([]*v1.Node, 0, names.Len())
	for _, n := range sets.List(names) {
		node := &v1.Node{}
		node.Name = n
		out = append(out, node)
	}
	return out
}
