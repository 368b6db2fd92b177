// Package gang implements Rota's Gang scheduler plugin: a group of pods
// (label rota.dev/gang, annotation rota.dev/gang-size) is admitted whole or
// not at all. Placed members wait at Permit, holding their devices, until
// the last member is placed; past the wait limit all of them are released
// together. Only one gang at a time may hold devices while incomplete, so
// two gangs competing for the same node never deadlock each holding half,
// and tenants take turns at that (turns.go), so one tenant's gangs that
// never complete cannot keep every other tenant's gangs out.
//
// Kubernetes 1.37's own gang API (scheduling.k8s.io Workload and PodGroup
// with the GangScheduling plugin) is beta and off by default, and its
// Permit timeout is fixed at five minutes; docs/admission.md says why Rota
// ships this small equivalent and how to move to the native API.
package gang

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/waits"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Gang"

var (
	_ fwk.PreFilterPlugin   = &Gang{}
	_ fwk.ReservePlugin     = &Gang{}
	_ fwk.PermitPlugin      = &Gang{}
	_ fwk.PostBindPlugin    = &Gang{}
	_ fwk.EnqueueExtensions = &Gang{}
)

// Gang is the plugin.
type Gang struct {
	handle    fwk.Handle
	pods      corelisters.PodLister
	waitLimit time.Duration
	writer    *waits.Writer
	// caches are the slice index, compiled selectors and match results,
	// shared with the scheduler's other Rota plugins.
	caches *gpupool.Caches

	mu sync.Mutex
	// holds maps a gang to its members that are reserved but not bound.
	holds map[types.NamespacedName]sets.Set[types.UID]
	// turns says which tenants let other tenants' gangs go first.
	turns *turns
}

// New builds the plugin from the profile's args, with caches of its own.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return Factory(nil)(ctx, obj, h)
}

// Factory returns a constructor whose plugin keeps its slice index,
// compiled selectors and match results in caches, shared with the other
// Rota plugins of the scheduler; nil gives the plugin caches of its own.
func Factory(caches *gpupool.Caches) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newGang(ctx, obj, h, gpupool.CachesOrNew(caches))
	}
}

func newGang(ctx context.Context, obj runtime.Object, h fwk.Handle, caches *gpupool.Caches) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	podInformer := h.SharedInformerFactory().Core().V1().Pods()
	pl := &Gang{
		handle: h, pods: podInformer.Lister(),
		waitLimit: args.WaitLimit.Duration,
		writer:    waits.NewWriter(h.ClientSet(), h.EventRecorder(), clock.RealClock{}),
		caches:    caches,
		holds:     map[types.NamespacedName]sets.Set[types.UID]{},
		turns:     newTurns(),
	}
	if err := pl.watchCreatedMembers(ctx, podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("watch gang members: %w", err)
	}
	pl.writer.Run(ctx, 1)
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *Gang) Name() string { return Name }

// gangOf returns the pod's gang and size; ok is false for pods in no gang.
func gangOf(pod *v1.Pod) (key types.NamespacedName, size int, ok bool, err error) {
	name := pod.Labels[gpuv1.GangLabel]
	if name == "" {
		return key, 0, false, nil
	}
	key = types.NamespacedName{Namespace: pod.Namespace, Name: name}
	size, err = strconv.Atoi(pod.Annotations[gpuv1.GangSizeAnnotation])
	if err != nil || size < 1 {
		return key, 0, true, fmt.Errorf("pod %s/%s is in gang %q but annotation %s=%q is not a positive integer", pod.Namespace, pod.Name, name, gpuv1.GangSizeAnnotation, pod.Annotations[gpuv1.GangSizeAnnotation])
	}
	return key, size, true, nil
}

// members returns the gang's pods that exist and are not terminating, and
// how many of them are bound.
func (pl *Gang) members(key types.NamespacedName) (all, bound int) {
	pods := pl.memberPods(key)
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return len(pods), bound
}

// memberPods returns the gang's pods that exist and are not terminating.
func (pl *Gang) memberPods(key types.NamespacedName) []*v1.Pod {
	pods, err := pl.pods.Pods(key.Namespace).List(labels.SelectorFromSet(labels.Set{gpuv1.GangLabel: key.Name}))
	if err != nil {
		return nil
	}
	live := pods[:0:0]
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// PreFilter lets a member try only when the whole gang exists and no other
// gang holds devices while incomplete.
func (pl *Gang) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, size, ok, err := gangOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if err != nil {
		return nil, pl.unschedulable(ctx, cs, pod, fwk.UnschedulableAndUnresolvable, err.Error())
	}
	if all, _ := pl.members(key); all < size {
		return nil, pl.unschedulable(ctx, cs, pod, fwk.Unschedulable, fmt.Sprintf("gang %s has %d of %d members; waiting for the rest to be created", key.Name, all, size))
	}
	pl.mu.Lock()
	if pl.holds[key].Len() > 0 {
		pl.mu.Unlock()
		return nil, nil
	}
	for _, other := range sortedKeys(pl.holds) {
		if other != key && pl.holds[other].Len() > 0 {
			n := pl.holds[other].Len()
			pl.mu.Unlock()
			return nil, pl.unschedulable(ctx, cs, pod, fwk.Unschedulable, fmt.Sprintf("gang %s waits: gang %s holds devices for %d members while incomplete and goes first (no two gangs hold partial placements at once)",
				key.Name, other, n))
		}
	}
	pl.mu.Unlock()
	if first, yield := pl.yieldTo(ctx, cs, key); yield {
		return nil, pl.unschedulable(ctx, cs, pod, fwk.Unschedulable, fmt.Sprintf("gang %s waits: a gang of namespace %s gave back a partial placement without completing, so gang %s of another tenant goes first (tenants take turns at partial placements)",
			key.Name, key.Namespace, first))
	}
	// The first member to be placed starts the gang's holds: only when the
	// pool has the devices for every member, so a gang that cannot fit
	// does not take and release devices over and over.
	if need, free, ok := pl.poolFits(ctx, cs, key); !ok {
		return nil, pl.unschedulable(ctx, cs, pod, fwk.Unschedulable, fmt.Sprintf("gang %s needs %d GPUs for its unplaced members, %d free matching GPUs in the pool", key.Name, need, free))
	}
	return nil, nil
}

// poolFits compares the devices the gang's unplaced members ask for (the
// first tier of each request) with the free, untainted devices that any
// of their requests could use. It is a necessary condition, not a
// placement: nodes and constraints are the scheduler's to check.
func (pl *Gang) poolFits(ctx context.Context, cs fwk.CycleState, key types.NamespacedName) (need, free int64, ok bool) {
	dra := pl.handle.SharedDRAManager()
	if dra == nil {
		return 0, 0, true
	}
	pods, err := pl.pods.Pods(key.Namespace).List(labels.SelectorFromSet(labels.Set{gpuv1.GangLabel: key.Name}))
	if err != nil {
		return 0, 0, true
	}
	inv, err := gpupool.CycleInventory(ctx, cs, dra, &pl.caches.Slices)
	if err != nil {
		return 0, 0, true
	}
	usable := sets.New[structured.DeviceID]()
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		requests, err := gpupool.PodRequests(dra, p)
		if err != nil {
			return 0, 0, true
		}
		for _, r := range requests {
			need += r.Tiers[0].Count
			for _, t := range r.Tiers {
				m, err := gpupool.NewMatcher(dra.DeviceClasses(), pl.caches.CEL, pl.caches.Matches, t)
				if err != nil {
					continue
				}
				for _, node := range inv.Nodes {
					for _, nd := range inv.ByNode[node] {
						d := inv.DeviceOf(node, nd)
						if d.FreeFor(t) && gpupool.BlockingTaint(d.Device, t.Tolerations) == nil && m.Matches(ctx, &d) {
							usable.Insert(d.ID)
						}
					}
				}
			}
		}
	}
	free = int64(usable.Len())
	return need, free, need <= free
}

func sortedKeys(m map[types.NamespacedName]sets.Set[types.UID]) []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// unschedulable keeps the pod out with msg, recorded for the WaitReason
// plugin as a GangIncomplete refusal (cyclestate.Refuse).
func (pl *Gang) unschedulable(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, code fwk.Code, msg string) *fwk.Status {
	klog.FromContext(ctx).V(3).Info("Gang member waits", "pod", klog.KObj(pod), "reason", msg)
	return cyclestate.Refuse(cs, Name, "", code, "", waits.Refusal{Reason: waits.GangIncomplete, Message: msg})
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Reserve records the member's hold on its devices.
func (pl *Gang) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	key, _, ok, err := gangOf(pod)
	if !ok || err != nil {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.holds[key] == nil {
		pl.holds[key] = sets.New[types.UID]()
		pl.turns.started(key.Namespace)
	}
	pl.holds[key].Insert(pod.UID)
	return nil
}

// Unreserve releases the member's hold and, all-or-nothing, every other
// waiting member of its gang; then the pods of other gangs get a try.
func (pl *Gang) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	key, size, ok, err := gangOf(pod)
	if !ok || err != nil {
		return
	}
	pl.mu.Lock()
	held := pl.holds[key].Len()
	pl.holds[key].Delete(pod.UID)
	empty := pl.holds[key].Len() == 0
	if empty {
		delete(pl.holds, key)
	}
	if held > 0 {
		pl.turns.released(key.Namespace)
	}
	pl.mu.Unlock()
	if held > 0 {
		_, bound := pl.members(key)
		pl.writer.Wait(pod, waits.Verdict{Reason: waits.GangIncomplete, Message: fmt.Sprintf(
			"gang %s was not complete within %s (%d of %d members placed); all its holds were released", key.Name, pl.waitLimit, held+bound, size)})
	}
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, _, ok, _ := gangOf(wp.GetPod()); ok && k == key && wp.GetPod().UID != pod.UID {
			wp.Reject(Name, fmt.Sprintf("gang %s: member %s released its devices", key.Name, pod.Name))
		}
	})
	if empty {
		pl.activateOthers(ctx, key)
	}
}

// activateOthers moves unbound members of other gangs to the active queue:
// the devices this gang held are free again.
func (pl *Gang) activateOthers(ctx context.Context, except types.NamespacedName) {
	sel, err := labels.Parse(gpuv1.GangLabel)
	if err != nil {
		return
	}
	pods, err := pl.pods.List(sel)
	if err != nil {
		return
	}
	wake := map[string]*v1.Pod{}
	for _, p := range pods {
		if k, _, ok, _ := gangOf(p); ok && k != except && p.Spec.NodeName == "" {
			wake[p.Namespace+"/"+p.Name] = p
		}
	}
	if len(wake) > 0 {
		pl.handle.Activate(klog.FromContext(ctx), wake)
	}
}

// Permit holds a member until the whole gang is placed, then lets all of
// them bind.
func (pl *Gang) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	key, size, ok, err := gangOf(pod)
	if !ok || err != nil {
		return nil, 0
	}
	_, bound := pl.members(key)
	pl.mu.Lock()
	held := pl.holds[key].Len()
	pl.mu.Unlock()
	if held+bound >= size {
		pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
			if k, _, ok, _ := gangOf(wp.GetPod()); ok && k == key {
				wp.Allow(Name)
			}
		})
		klog.FromContext(ctx).V(3).Info("Gang complete", "gang", key, "members", size)
		return nil, 0
	}
	msg := fmt.Sprintf("gang %s: %d of %d members placed and holding their devices; waiting up to %s for the rest", key.Name, held+bound, size, pl.waitLimit)
	pl.writer.Wait(pod, waits.Verdict{Reason: waits.GangIncomplete, Message: msg})
	return fwk.NewStatus(fwk.Wait, msg), pl.waitLimit
}

// PostBind drops the bound member's hold: it counts as bound from now on.
func (pl *Gang) PostBind(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	key, _, ok, err := gangOf(pod)
	if !ok || err != nil {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.holds[key].Delete(pod.UID)
	if pl.holds[key].Len() == 0 {
		delete(pl.holds, key)
	}
}

// EventsToRegister: a member waiting for its gang may go when a member is
// created, or when pods (and their devices) come and go.
func (pl *Gang) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add}},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add | fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}},
	}, nil
}
