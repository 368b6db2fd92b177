package forecast

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// packResult is the packing answer for one running set: "" when every pod
// finds a node, else the load whose pod did not and why.
type packResult struct {
	load, detail string
	// nodes are the GPUs per node and model once every pod is placed (nil
	// when some pod is not), the allocated claims included.
	nodes map[string]map[string]int
}

// check records seg's over-commits: by count for every model whose demand
// exceeds its capacity, else by fragmentation when the pods do not pack.
// The segment's GPUs per node are set when its pods pack.
func (r *run) check(ctx context.Context, seg *Segment) error {
	counted := false
	for _, model := range slices.Sorted(maps.Keys(seg.Demand)) {
		if seg.Demand[model] > r.out.Capacity[model] {
			counted = true
			r.record(*seg, model, ReasonCount, "")
		}
	}
	if counted || len(seg.Running) == 0 {
		return nil
	}
	res, err := r.pack(ctx, seg.Running)
	if err != nil {
		return err
	}
	seg.Nodes = res.nodes
	if res.load == "" {
		return nil
	}
	per := r.perPod[res.load]
	model := ""
	for _, m := range per {
		for k := range m {
			model = k
		}
	}
	r.record(*seg, model, ReasonFragmentation, res.detail)
	return nil
}

// record adds an over-commit of model over seg, extending the previous one
// when it is the same window continued.
func (r *run) record(seg Segment, model, reason, detail string) {
	oc := Overcommit{Model: model, From: seg.From, To: seg.To, Demand: seg.Demand[model],
		Capacity: r.out.Capacity[model], Reason: reason, Detail: detail}
	for _, name := range slices.Sorted(maps.Keys(seg.Running)) {
		uses := false
		for _, per := range r.perPod[name] {
			uses = uses || per[model] > 0
		}
		if !uses {
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

func (r *run) always(name string) bool {
	for i := range r.in.Always {
		if r.in.Always[i].Name == name {
			return true
		}
	}
	return false
}

// pack places every running pod with the capacity preview (the real DRA
// allocator, node by node, first fit) on top of the allocated claims: the
// always-running workloads first, then the targets, largest pods first.
func (r *run) pack(ctx context.Context, running map[string]int32) (packResult, error) {
	names := slices.Sorted(maps.Keys(running))
	key := make([]string, len(names))
	for i, n := range names {
		key[i] = fmt.Sprintf("%s=%d", n, running[n])
	}
	k := strings.Join(key, ",")
	if res, ok := r.packed[k]; ok {
		return res, nil
	}
	shapes := r.shapes(names, running)
	demands := make([]preview.Demand, len(shapes))
	for i, s := range shapes {
		demands[i] = s.d
	}
	res, err := r.previewr.Check(ctx, preview.Inputs{Nodes: r.nodes(), Slices: r.in.Slices, Claims: r.in.Allocated, Classes: r.in.Classes}, demands...)
	out := packResult{}
	switch {
	case err != nil:
		// The allocator refused a claim (a selector it cannot evaluate):
		// say so, and judge the stretch by count alone.
		r.out.Notes = append(r.out.Notes, fmt.Sprintf("not packed per node (%s): %v", k, err))
	case res.Fits:
		out.nodes = r.placed(shapes, res.Nodes)
	default:
		out = notPlaced(shapes, res)
	}
	r.packed[k] = out
	return out, nil
}

// packShape is one pod template of a workload, as many times as the
// workload runs replicas in the stretch being packed.
type packShape struct {
	load     string
	template int
	gpus     int
	d        preview.Demand
}

// shapes are the pods to pack: workloads no schedule touches first (they
// are already running where they are), then the targets, the largest pods
// first.
func (r *run) shapes(names []string, running map[string]int32) []packShape {
	var shapes []packShape
	for _, name := range names {
		if r.unmatched[name] {
			continue
		}
		for i, d := range r.loads[name].Replica {
			gpus := 0
			for _, c := range r.perPod[name][i] {
				gpus += c
			}
			shapes = append(shapes, packShape{load: name, template: i, gpus: gpus,
				d: preview.Demand{PodClaims: d.PodClaims, Pods: d.Pods * int(running[name])}})
		}
	}
	sort.SliceStable(shapes, func(i, j int) bool {
		if ai, aj := r.always(shapes[i].load), r.always(shapes[j].load); ai != aj {
			return ai
		}
		return shapes[i].gpus > shapes[j].gpus
	})
	return shapes
}

// placed is the GPUs per node and model once the shapes' pods sit on the
// nodes the allocator gave them (in order), with the fixed demand.
func (r *run) placed(shapes []packShape, nodes []string) map[string]map[string]int {
	out := map[string]map[string]int{}
	for node, per := range r.fixedNodes {
		out[node] = maps.Clone(per)
	}
	pod := 0
	for _, s := range shapes {
		if len(s.d.PodClaims) == 0 {
			continue
		}
		for range s.d.Pods {
			node := nodes[pod]
			pod++
			if out[node] == nil {
				out[node] = map[string]int{}
			}
			for m, c := range r.perPod[s.load][s.template] {
				out[node][m] += c
			}
		}
	}
	return out
}

// notPlaced names the workload of the first pod the allocator could not
// place (res.Nodes holds the pods placed before it).
func notPlaced(shapes []packShape, res preview.Result) packResult {
	failed := len(res.Nodes)
	for _, s := range shapes {
		if len(s.d.PodClaims) == 0 {
			continue
		}
		if failed < s.d.Pods {
			return packResult{load: s.load, detail: fmt.Sprintf("a pod of %s (%d GPUs) fits on no node once the running workloads and the larger pods are placed; %s", s.load, s.gpus, res.Message)}
		}
		failed -= s.d.Pods
	}
	return packResult{}
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
