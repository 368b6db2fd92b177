package advisor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// Objects are what Build reads: the pool model and the listed objects
// around it, as the scheduler's informers or a client hand them.
type Objects struct {
	Pool    *gpupool.Pool
	Classes structured.DeviceClassLister
	CEL     *cel.Cache
	Matches *gpupool.MatchCache
	// Pods are every pod that may hold or wait for devices.
	Pods []*v1.Pod
	// Claim returns a ResourceClaim by namespace and name.
	Claim func(namespace, name string) (*resourceapi.ResourceClaim, error)
	PDBs  []*policyv1.PodDisruptionBudget
	// Limits are the tenants' per-model limits (the Quota plugin's args).
	Limits map[string]map[string]int
	// Releases are the coming DeploySchedule transitions and reservation
	// ends, with Workloads naming pods as "namespace/name"; Build rewrites
	// them to the keys of the workloads that hold those pods.
	Releases []Release
}

// Build turns objects into a Snapshot and the waiting unit of pod: the pod
// with every pending member of its gang and every pod that shares one of
// its claims.
func Build(ctx context.Context, o Objects, pod *v1.Pod) (*Snapshot, *Workload, error) {
	b, err := NewBuilder(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	unit, err := b.Unit(pod)
	if err != nil {
		return nil, nil, err
	}
	return b.Snapshot(), unit, nil
}

// Builder holds one Snapshot built from objects and makes the waiting
// unit of any pod among them, so that the pods advised at one moment share
// one snapshot (and one Advisor).
type Builder struct {
	b    *builder
	snap *Snapshot
}

// Snapshot is the cluster the builder read.
func (b *Builder) Snapshot() *Snapshot { return b.snap }

// Unit is the waiting unit of pod: the pod with every pending member of its
// gang and every pod that shares one of its claims.
func (b *Builder) Unit(pod *v1.Pod) (*Workload, error) {
	return b.b.unit(pod)
}

// NewBuilder turns objects into a Snapshot.
func NewBuilder(ctx context.Context, o Objects) (*Builder, error) {
	b := &builder{ctx: ctx, o: o, tiers: map[string]Tier{}, byKey: map[string]*v1.Pod{}, parent: map[string]string{},
		keys: map[string]string{}, claimGroup: map[*Workload]map[string]int{}, members: map[string][]string{}}
	for _, p := range o.Pods {
		b.byKey[podKey(p)] = p
	}
	b.joinPods()
	b.nameWorkloads()
	snap := &Snapshot{Budgets: map[string]int{}, Limits: o.Limits}
	units := map[string]*Workload{}
	var order []string
	for _, k := range slices.Sorted(maps.Keys(b.byKey)) {
		p := b.byKey[k]
		if p.Spec.NodeName == "" || podDone(p) {
			continue
		}
		root := b.keyOf(k)
		w, ok := units[root]
		if !ok {
			w = &Workload{Key: root, Namespace: p.Namespace, Priority: priority(p), Budgets: map[string]int{}}
			units[root] = w
			order = append(order, root)
		}
		w.Priority = max(w.Priority, priority(p))
		if p.DeletionTimestamp != nil {
			w.Fixed = "terminating"
		}
		if pin := pinned(p); pin != "" {
			w.Pinned = pin
		}
		for _, pdb := range o.PDBs {
			if selects(pdb, p) {
				w.Budgets[pdb.Namespace+"/"+pdb.Name]++
			}
		}
		if err := b.addGroup(w, p, true); err != nil {
			return nil, err
		}
	}
	held := map[string]string{}
	for _, d := range o.Pool.Devices() {
		for _, a := range d.Allocations {
			for _, h := range a.Pods {
				if w := units[b.keyOf(h.String())]; w != nil {
					held[d.ID.String()] = w.Key
				}
			}
		}
	}
	for _, d := range o.Pool.Devices() {
		id := d.ID.String()
		holder := held[id]
		if holder == "" && d.Allocated {
			// Allocated to a claim no listed pod holds (in flight, or
			// reserved for something else): taken, and no plan moves it.
			holder = "claim " + d.HolderClaim.String()
		}
		snap.Devices = append(snap.Devices, Device{ID: id, Node: d.Node, Model: d.Model(), Holder: holder})
		if w := units[held[id]]; w != nil {
			w.Held = append(w.Held, id)
		}
	}
	for _, k := range order {
		if w := units[k]; len(w.Held) > 0 {
			snap.Running = append(snap.Running, *w)
		}
	}
	for _, pdb := range o.PDBs {
		snap.Budgets[pdb.Namespace+"/"+pdb.Name] = b.allowed(pdb)
	}
	for _, r := range o.Releases {
		rr := r
		rr.Workloads = nil
		for _, pk := range r.Workloads {
			if w := units[b.keyOf(pk)]; w != nil {
				rr.Workloads = appendUnique(rr.Workloads, w.Key)
			}
		}
		snap.Releases = append(snap.Releases, rr)
	}
	sort.SliceStable(snap.Releases, func(i, j int) bool { return snap.Releases[i].At.Before(snap.Releases[j].At) })
	snap.Models = b.models()
	for _, k := range slices.Sorted(maps.Keys(b.byKey)) {
		root := b.keyOf(k)
		b.members[root] = append(b.members[root], k)
	}
	return &Builder{b: b, snap: snap}, nil
}

// unit builds the waiting unit of pod from its pending members.
func (b *builder) unit(pod *v1.Pod) (*Workload, error) {
	unit := &Workload{Key: b.keyOf(podKey(pod)), Namespace: pod.Namespace, Priority: priority(pod)}
	for _, k := range b.members[unit.Key] {
		p := b.byKey[k]
		if p.Spec.NodeName != "" || podDone(p) {
			continue
		}
		if err := b.addGroup(unit, p, false); err != nil {
			return nil, err
		}
	}
	return unit, nil
}

type builder struct {
	ctx    context.Context
	o      Objects
	tiers  map[string]Tier
	byKey  map[string]*v1.Pod
	parent map[string]string
	// keys names each pod's workload (keyOf).
	keys map[string]string
	// claimGroup maps, per workload, a claim to the index of its group,
	// so pods sharing a claim land in one group.
	claimGroup map[*Workload]map[string]int
	// members are each workload's pods, by name.
	members map[string][]string
}

func podKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

func podDone(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// pinned says why a pod cannot run on another node, or "".
func pinned(p *v1.Pod) string {
	if len(p.Spec.NodeSelector) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(p.Spec.NodeSelector)) {
			parts = append(parts, k+"="+p.Spec.NodeSelector[k])
		}
		return "nodeSelector " + strings.Join(parts, ",")
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return "required node affinity"
	}
	return ""
}

// joinPods unites gang members and pods that share a claim: they move and
// wait as one.
func (b *builder) joinPods() {
	byClaim := map[string]string{}
	gangs := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(b.byKey)) {
		p := b.byKey[k]
		if g := p.Labels[gpuv1.GangLabel]; g != "" {
			gk := p.Namespace + "/gang:" + g
			if first, ok := gangs[gk]; ok {
				b.union(first, k)
			} else {
				gangs[gk] = k
			}
		}
		for i := range p.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue
			}
			ck := p.Namespace + "/" + *name
			if first, ok := byClaim[ck]; ok {
				b.union(first, k)
			} else {
				byClaim[ck] = k
			}
		}
	}
}

func (b *builder) find(k string) string {
	for {
		p, ok := b.parent[k]
		if !ok || p == k {
			return k
		}
		k = p
	}
}

func (b *builder) union(a, c string) {
	ra, rc := b.find(a), b.find(c)
	if ra != rc {
		if rc < ra {
			ra, rc = rc, ra
		}
		b.parent[rc] = ra
	}
}

// keyOf names the workload of a pod: its gang, else the first pod (by
// name) of the pods it shares claims with.
func (b *builder) keyOf(pk string) string {
	if k, ok := b.keys[pk]; ok {
		return k
	}
	return b.find(pk)
}

// nameWorkloads fills keys once every pod is joined.
func (b *builder) nameWorkloads() {
	gangOf := map[string]string{}
	for k, p := range b.byKey {
		if g := p.Labels[gpuv1.GangLabel]; g != "" {
			gangOf[b.find(k)] = p.Namespace + "/gang:" + g
		}
	}
	for k := range b.byKey {
		root := b.find(k)
		if g, ok := gangOf[root]; ok {
			b.keys[k] = g
		} else {
			b.keys[k] = root
		}
	}
}

// addGroup adds pod p to w: into the group of a claim it shares, else as a
// new group with its claims' requests (allocated claims too when running,
// for where it could move).
func (b *builder) addGroup(w *Workload, p *v1.Pod, running bool) error {
	if b.claimGroup[w] == nil {
		b.claimGroup[w] = map[string]int{}
	}
	gi := -1
	var claims []*resourceapi.ResourceClaim
	for i := range p.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
		if err != nil {
			return fmt.Errorf("pod %s claim %q: %w", podKey(p), p.Spec.ResourceClaims[i].Name, err)
		}
		if name == nil {
			continue
		}
		ck := p.Namespace + "/" + *name
		if g, ok := b.claimGroup[w][ck]; ok {
			gi = g
			continue
		}
		c, err := b.o.Claim(p.Namespace, *name)
		if err != nil {
			if running {
				continue
			}
			return fmt.Errorf("claim %s of pod %s: %w", ck, podKey(p), err)
		}
		if !running && c.Status.Allocation != nil {
			continue
		}
		claims = append(claims, c)
	}
	if gi >= 0 {
		w.Groups[gi].Pods = append(w.Groups[gi].Pods, podKey(p))
	}
	if len(claims) == 0 {
		return nil
	}
	if gi < 0 {
		w.Groups = append(w.Groups, Group{Pods: []string{podKey(p)}})
		gi = len(w.Groups) - 1
	}
	g := &w.Groups[gi]
	if !running && len(p.Spec.NodeSelector) > 0 {
		g.Nodes = b.nodesSelected(p)
	}
	for _, c := range claims {
		b.claimGroup[w][c.Namespace+"/"+c.Name] = gi
		for _, r := range gpupool.ClaimRequests(c) {
			req := Request{Name: r.Name}
			for _, t := range r.Tiers {
				req.Tiers = append(req.Tiers, b.tier(t))
			}
			g.Requests = append(g.Requests, req)
		}
	}
	return nil
}

// nodesSelected are the pool's nodes a waiting pod's hostname selector
// allows; other selectors are left to the scheduler's own answer.
func (b *builder) nodesSelected(p *v1.Pod) []string {
	if h, ok := p.Spec.NodeSelector[v1.LabelHostname]; ok {
		return []string{h}
	}
	return nil
}

// tier evaluates a tier's selectors and tolerations over the pool once
// per distinct tier of the call.
func (b *builder) tier(t gpupool.Tier) Tier {
	sig := fmt.Sprintf("%s\x00%q\x00%d\x00%v\x00%v", t.Class, t.Selectors, t.Count, t.All, t.Tolerations)
	if cached, ok := b.tiers[sig]; ok {
		return cached
	}
	out := Tier{Name: t.Name, Count: int(t.Count), Devices: map[string]bool{}, Blocked: map[string]string{}}
	m, err := gpupool.NewMatcher(b.o.Classes, b.o.CEL, b.o.Matches, t)
	if err == nil {
		for _, d := range b.o.Pool.Devices() {
			if !m.Matches(b.ctx, d) {
				continue
			}
			if out.Model == "" {
				out.Model = d.Model()
			}
			other, reservedBy := gpupool.Blocked(d.Device, t.Tolerations)
			switch {
			case other != nil:
				out.Blocked[d.ID.String()] = "tainted " + other.Key
			case reservedBy != "":
				// Not named: the advice is shown to the waiting pod's
				// owner, who may be another tenant.
				out.Blocked[d.ID.String()] = "reserved by a GPUReservation"
			default:
				out.Devices[d.ID.String()] = true
			}
		}
	}
	if out.Model == "" {
		out.Model = t.Name
	}
	b.tiers[sig] = out
	return out
}

// models are the pool's models with their untainted devices, for the tier
// option.
func (b *builder) models() []Tier {
	by := map[string]*Tier{}
	for _, d := range b.o.Pool.Devices() {
		m := d.Model()
		if m == "" || gpupool.BlockingTaint(d.Device, nil) != nil {
			continue
		}
		if by[m] == nil {
			by[m] = &Tier{Name: strings.ToLower(m), Model: m, Count: 1, Devices: map[string]bool{}}
		}
		by[m].Devices[d.ID.String()] = true
	}
	var out []Tier
	for _, m := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[m])
	}
	return out
}

func selects(pdb *policyv1.PodDisruptionBudget, p *v1.Pod) bool {
	if pdb.Namespace != p.Namespace {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels))
}

// allowed is how many more disruptions a budget allows, from its spec
// and the pods it selects (the disruption controller's status may lag or,
// in the sandbox, not exist); a percentage falls back to the status.
func (b *builder) allowed(pdb *policyv1.PodDisruptionBudget) int {
	selected, running := 0, 0
	for _, p := range b.byKey {
		if !selects(pdb, p) || podDone(p) {
			continue
		}
		selected++
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			running++
		}
	}
	switch {
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		return max(running-int(pdb.Spec.MinAvailable.IntVal), 0)
	case pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.Type == intstr.Int:
		return max(int(pdb.Spec.MaxUnavailable.IntVal)-(selected-running), 0)
	default:
		return int(pdb.Status.DisruptionsAllowed)
	}
}
