package fairness

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/waits"
)

// The queue order alone cannot guarantee a turn: kube-scheduler retries a
// pod only after its backoff, so when a GPU frees up the first pod tried
// may be one of the flooding tenant's while the fairer pod still sits in
// backoff. PreFilter closes that gap. A pod waits its turn (NotAttempted,
// "queued behind ...") when a pending pod of another tenant goes first in
// the fair order and would fit now; that pod is moved to the active queue
// at once. When the fairer pod does not fit (its shape needs more than is
// free), the pod backfills: capacity never idles for the sake of order.

// pending indexes the rota-scheduler pods with claims that are not bound.
type pending struct {
	mu    sync.RWMutex
	byNS  map[string]map[types.NamespacedName]Entry
	sched string
}

func newPending(schedulerName string) *pending {
	return &pending{byNS: map[string]map[types.NamespacedName]Entry{}, sched: schedulerName}
}

func (p *pending) update(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	want := pod.Spec.SchedulerName == p.sched && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && len(pod.Spec.ResourceClaims) > 0
	p.mu.Lock()
	defer p.mu.Unlock()
	if !want {
		delete(p.byNS[pod.Namespace], key)
		if len(p.byNS[pod.Namespace]) == 0 {
			delete(p.byNS, pod.Namespace)
		}
		return
	}
	if p.byNS[pod.Namespace] == nil {
		p.byNS[pod.Namespace] = map[types.NamespacedName]Entry{}
	}
	prio := int32(0)
	if pod.Spec.Priority != nil {
		prio = *pod.Spec.Priority
	}
	p.byNS[pod.Namespace][key] = Entry{Namespace: pod.Namespace, Name: pod.Name, Priority: prio, Created: pod.CreationTimestamp.Time}
}

func (p *pending) remove(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.byNS[pod.Namespace], types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		if len(p.byNS[pod.Namespace]) == 0 {
			delete(p.byNS, pod.Namespace)
		}
	}
}

// first returns, per namespace other than except, its pending pod that
// goes first, ordered by o.
func (p *pending) first(except string, o Order) []Entry {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []Entry
	for ns, pods := range p.byNS {
		if ns == except {
			continue
		}
		var best *Entry
		for _, e := range pods {
			if best == nil || o.Less(e, *best) {
				b := e
				best = &b
			}
		}
		if best != nil {
			out = append(out, *best)
		}
	}
	return out
}

// turnChecker decides whether a pod must let another tenant's pod go first.
type turnChecker struct {
	pods corelisters.PodLister
	dra  fwk.SharedDRAManager
	// caches are the slice index, compiled selectors and match results,
	// shared with the scheduler's other Rota plugins.
	caches *gpupool.Caches
	// causes are the causes of pods' waits, kept by the WaitReason plugin.
	causes   *waits.Causes
	pending  *pending
	activate fwk.PodActivator
}

// PreFilter makes the pod wait its turn behind a fairer pod that fits now.
func (pl *Fairness) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if pl.turn == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	me := Entry{Namespace: pod.Namespace, Name: pod.Name, Created: pod.CreationTimestamp.Time}
	if pod.Spec.Priority != nil {
		me.Priority = *pod.Spec.Priority
	}
	candidates := pl.turn.pending.first(pod.Namespace, pl.order)
	// Fairest first; the first that fits now takes the turn.
	sortEntries(candidates, pl.order)
	for _, c := range candidates {
		if !pl.order.Less(c, me) {
			break
		}
		other, err := pl.turn.pods.Pods(c.Namespace).Get(c.Name)
		if err != nil || !pl.turn.eligible(other) || !pl.turn.fitsNow(ctx, cs, other) {
			continue
		}
		pl.turn.activate.Activate(klog.FromContext(ctx), map[string]*v1.Pod{c.Namespace + "/" + c.Name: other})
		msg := fmt.Sprintf("queued behind %s/%s: its tenant holds %.1f weighted GPUs, %s holds %.1f", c.Namespace, c.Name, pl.share(c.Namespace), pod.Namespace, pl.share(pod.Namespace))
		klog.FromContext(ctx).V(4).Info("Pod waits its turn", "pod", klog.KObj(pod), "behind", klog.KRef(c.Namespace, c.Name))
		return nil, cyclestate.Refuse(cs, Name, "", fwk.Unschedulable, "", waits.Refusal{Reason: waits.NotAttempted, Message: msg})
	}
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *Fairness) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

func sortEntries(es []Entry, o Order) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && o.Less(es[j], es[j-1]); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// eligible excludes pods whose last wait was an admission answer, a
// constraint conflict or a rejection of every node with the devices:
// letting them go first would only idle capacity.
func (t *turnChecker) eligible(pod *v1.Pod) bool {
	c := waits.Current(pod)
	if c == nil || c.Status != v1.ConditionTrue {
		return true
	}
	switch waits.Reason(c.Reason) {
	case waits.QuotaExceeded, waits.ReservationOvercommitted, waits.GangIncomplete:
		return false
	}
	// Nor pods that free devices would not help (the cause the WaitReason
	// plugin recorded, not the pod's annotation, which its tenant can
	// rewrite): a constraint conflict, other plugins rejected every node
	// that has them, or the Reservation plugin refused the pod (it reaches
	// for a reservation it is not a member of).
	switch t.causes.Of(pod.UID) {
	case waits.CauseConstraintConflict, waits.CauseNodesRejected, waits.CauseRefusedByReservation:
		return false
	}
	return true
}

// fitsNow reports whether every request of the pod's unallocated claims
// has a tier with enough free, untainted matching devices on one node.
// It ignores everything but devices; a pod that fails for other reasons
// after its turn loses it at its next attempt.
func (t *turnChecker) fitsNow(ctx context.Context, cs fwk.CycleState, pod *v1.Pod) bool {
	requests, err := gpupool.PodRequests(t.dra, pod)
	if err != nil {
		return false
	}
	if len(requests) == 0 {
		return true
	}
	inv, err := gpupool.CycleInventory(ctx, cs, t.dra, &t.caches.Slices)
	if err != nil {
		return false
	}
	for _, node := range inv.Nodes {
		if t.fitsOn(ctx, inv, node, requests) {
			return true
		}
	}
	return false
}

func (t *turnChecker) fitsOn(ctx context.Context, inv *gpupool.Inventory, node string, requests []gpupool.Request) bool {
	for _, r := range requests {
		ok := false
		for _, tier := range r.Tiers {
			m, err := gpupool.NewMatcher(t.dra.DeviceClasses(), t.caches.CEL, t.caches.Matches, tier)
			if err != nil {
				continue
			}
			free := int64(0)
			for _, nd := range inv.ByNode[node] {
				d := inv.DeviceOf(node, nd)
				if d.FreeFor(tier) && gpupool.BlockingTaint(d.Device, tier.Tolerations) == nil && m.Matches(ctx, &d) {
					free++
				}
			}
			if free >= tier.Count {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// EventsToRegister: a pod that waited its turn may go once the fairer pod
// is placed or gone, or devices free up.
func (pl *Fairness) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add}},
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}},
	}, nil
}
