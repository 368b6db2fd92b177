// Package fairness implements Rota's Fairness queue sort: weighted fair
// ordering of the rota-scheduler queue by tenant (namespace) usage, with
// wait-time ageing, so that one tenant's flood of pods cannot starve a
// tenant that submits later. kube-scheduler requires one QueueSort plugin
// for all profiles of a scheduler; rota-scheduler runs one profile.
package fairness

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/waits"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Fairness"

var (
	_ fwk.QueueSortPlugin   = &Fairness{}
	_ fwk.PreFilterPlugin   = &Fairness{}
	_ fwk.EnqueueExtensions = &Fairness{}
)

// Fairness is the plugin.
type Fairness struct {
	order   Order
	weights map[string]int32
	deflt   int32
	usage   *usage
	turn    *turnChecker
}

// New builds the plugin from the profile's args, with caches of its own.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return Factory(nil, nil)(ctx, obj, h)
}

// Factory returns a constructor whose plugin keeps its slice index,
// compiled selectors and match results in caches, shared with the other
// Rota plugins of the scheduler, and reads the causes of pods' waits from
// causes, which the WaitReason plugin keeps; nil gives the plugin caches
// (or a record) of its own.
func Factory(caches *gpupool.Caches, causes *waits.Causes) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newFairness(ctx, obj, h, gpupool.CachesOrNew(caches), waits.CausesOrNew(causes))
	}
}

// newFairness builds the plugin and starts counting devices per tenant
// from the scheduler's ResourceClaim informer.
func newFairness(_ context.Context, obj runtime.Object, h fwk.Handle, caches *gpupool.Caches, causes *waits.Causes) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	pl := &Fairness{weights: map[string]int32{}, deflt: args.DefaultWeight, usage: newUsage()}
	for _, t := range args.Tenants {
		pl.weights[t.Namespace] = t.Weight
	}
	pl.order = Order{Share: pl.share, Ageing: args.Ageing.Duration}
	_, err = h.SharedInformerFactory().Resource().V1().ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pl.usage.set(obj) },
		UpdateFunc: func(_, obj any) { pl.usage.set(obj) },
		DeleteFunc: func(obj any) { pl.usage.remove(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch ResourceClaims: %w", err)
	}
	if dra := h.SharedDRAManager(); dra != nil {
		pl.turn = &turnChecker{
			pods: h.SharedInformerFactory().Core().V1().Pods().Lister(), dra: dra,
			caches: caches, causes: causes, pending: newPending(h.ProfileName()), activate: h,
		}
		_, err = h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    pl.turn.pending.update,
			UpdateFunc: func(_, obj any) { pl.turn.pending.update(obj) },
			DeleteFunc: pl.turn.pending.remove,
		})
		if err != nil {
			return nil, fmt.Errorf("watch pods: %w", err)
		}
	}
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *Fairness) Name() string { return Name }

func (pl *Fairness) share(namespace string) float64 {
	w, ok := pl.weights[namespace]
	if !ok {
		w = pl.deflt
	}
	return float64(pl.usage.get(namespace)) / float64(w)
}

// podOf returns the pod of a queued entity, or nil for pod groups.
func podOf(e fwk.QueuedEntityInfo) *v1.Pod {
	pi, ok := e.(interface{ GetPodInfo() fwk.PodInfo })
	if !ok || pi.GetPodInfo() == nil {
		return nil
	}
	return pi.GetPodInfo().GetPod()
}

func entryOf(e fwk.QueuedEntityInfo) (Entry, bool) {
	p := podOf(e)
	if p == nil {
		return Entry{}, false
	}
	return Entry{Namespace: p.Namespace, Name: p.Name, Priority: e.GetPriority(), Created: p.CreationTimestamp.Time, Queued: e.GetTimestamp()}, true
}

// Less implements fwk.QueueSortPlugin. Entities that are not single pods
// (pod groups) are ordered by priority and queue time, as PrioritySort does.
func (pl *Fairness) Less(a, b fwk.QueuedEntityInfo) bool {
	ea, okA := entryOf(a)
	eb, okB := entryOf(b)
	if !okA || !okB {
		pa, pb := a.GetPriority(), b.GetPriority()
		return pa > pb || (pa == pb && a.GetTimestamp().Before(b.GetTimestamp()))
	}
	return pl.order.Less(ea, eb)
}

// usage counts allocated devices per namespace, claim by claim.
type usage struct {
	mu      sync.RWMutex
	byClaim map[types.UID]claimUse
	byNS    map[string]int
}

type claimUse struct {
	namespace string
	devices   int
}

func newUsage() *usage {
	return &usage{byClaim: map[types.UID]claimUse{}, byNS: map[string]int{}}
}

func (u *usage) get(namespace string) int {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.byNS[namespace]
}

func (u *usage) set(obj any) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	n := 0
	if c.Status.Allocation != nil {
		n = len(c.Status.Allocation.Devices.Results)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	old := u.byClaim[c.UID]
	u.byNS[old.namespace] -= old.devices
	if n == 0 {
		delete(u.byClaim, c.UID)
	} else {
		u.byClaim[c.UID] = claimUse{namespace: c.Namespace, devices: n}
		u.byNS[c.Namespace] += n
	}
	if u.byNS[old.namespace] == 0 {
		delete(u.byNS, old.namespace)
	}
}

func (u *usage) remove(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	old, ok := u.byClaim[c.UID]
	if !ok {
		return
	}
	delete(u.byClaim, c.UID)
	u.byNS[old.namespace] -= old.devices
	if u.byNS[old.namespace] == 0 {
		delete(u.byNS, old.namespace)
	}
}
