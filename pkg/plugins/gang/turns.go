package gang

import (
	"context"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// turns bounds what one tenant's gangs can do to the others'. Only one
// gang at a time may hold a partial placement, for up to the wait limit,
// and a gang's size is its tenant's to set; without turns, a tenant whose
// gangs never complete (a member that fits nowhere) could take that one
// slot again each time it is freed. A tenant (namespace) whose gang
// released a partial placement without completing yields: while a gang of
// a tenant that does not yield is waiting, complete in members, the
// yielding tenant's gangs do not start a partial placement. Once a gang of
// another tenant starts one, the earlier tenants have had their turn taken
// and yield no more. Each tenant can therefore block the others for at
// most one wait limit per turn.
//
// turns is guarded by the plugin's mutex.
type turns struct {
	yielding sets.Set[string]
}

func newTurns() *turns { return &turns{yielding: sets.New[string]()} }

// released records that a gang of namespace gave back a partial placement
// without completing.
func (t *turns) released(namespace string) { t.yielding.Insert(namespace) }

// started records that a gang of namespace started a partial placement:
// every other tenant has been overtaken once and yields no more.
func (t *turns) started(namespace string) {
	yields := t.yielding.Has(namespace)
	t.yielding = sets.New[string]()
	if yields {
		t.yielding.Insert(namespace)
	}
}

// goesFirst returns the first waiting gang, in name order, that a gang of
// namespace must let go first: one of another tenant that does not yield
// and that fits the pool now (a gang that cannot start would otherwise
// keep the yielding tenant out for good).
func (t *turns) goesFirst(namespace string, waiting []types.NamespacedName, fits func(types.NamespacedName) bool) (types.NamespacedName, bool) {
	if !t.yielding.Has(namespace) {
		return types.NamespacedName{}, false
	}
	for _, g := range waiting {
		if g.Namespace != namespace && !t.yielding.Has(g.Namespace) && fits(g) {
			return g, true
		}
	}
	return types.NamespacedName{}, false
}

// yieldTo returns the gang that gang key must let go first, if any.
func (pl *Gang) yieldTo(ctx context.Context, cs fwk.CycleState, key types.NamespacedName) (types.NamespacedName, bool) {
	pl.mu.Lock()
	yields := pl.turns.yielding.Has(key.Namespace)
	pl.mu.Unlock()
	if !yields {
		return types.NamespacedName{}, false
	}
	waiting := pl.waitingGangs()
	fits := func(g types.NamespacedName) bool {
		_, _, ok := pl.poolFits(ctx, cs, g)
		return ok
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.turns.goesFirst(key.Namespace, waiting, fits)
}

// waitingGangs lists, in name order, the gangs whose every member exists
// and at least one is not bound yet: those that could start a placement.
func (pl *Gang) waitingGangs() []types.NamespacedName {
	sel, err := labels.Parse(gpuv1.GangLabel)
	if err != nil {
		return nil
	}
	pods, err := pl.pods.List(sel)
	if err != nil {
		return nil
	}
	type count struct{ size, all, unbound int }
	counts := map[types.NamespacedName]*count{}
	for _, p := range pods {
		key, size, ok, err := gangOf(p)
		if !ok || err != nil || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		c := counts[key]
		if c == nil {
			c = &count{size: size}
			counts[key] = c
		}
		c.all++
		if p.Spec.NodeName == "" {
			c.unbound++
		}
	}
	var out []types.NamespacedName
	for key, c := range counts {
		if c.all >= c.size && c.unbound > 0 {
			out = append(out, key)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
