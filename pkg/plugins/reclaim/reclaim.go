package reclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/evictor"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/pkg/plugins/advisorinput"
	"github.com/rota-dev/rota/pkg/waits"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Reclaim"

// evictionWorkers is how many victims are checkpointed and evicted at
// once.
const evictionWorkers = 8

// planMaxChecks bounds the advisor's move search for one reclaim.
const planMaxChecks = 20000

// lapse is how long a reclaim keeps its model from borrowers beyond the
// longest checkpoint grace of its victims: time for the evictions and for
// the unit to be placed once they are done.
const lapse = 2 * time.Minute

var (
	_ fwk.PostFilterPlugin = &Reclaim{}
	_ fwk.PostBindPlugin   = &Reclaim{}
)

// Evictor evicts a reclaim's victims, each after its checkpoint
// (pkg/evictor).
type Evictor interface {
	// Submit queues the victims not already in progress and returns how
	// many it queued.
	Submit(victims []evictor.Victim) int
}

// Reclaim is the plugin.
type Reclaim struct {
	handle  fwk.Handle
	dra     fwk.SharedDRAManager
	caches  *gpupool.Caches
	live    *gpuquota.Live
	pods    corelisters.PodLister
	pdbs    policylisters.PodDisruptionBudgetLister
	evictor Evictor
	clock   clock.PassiveClock
	// preemption is kube-scheduler's DefaultPreemption, restricted to
	// victims of the preemptor's own namespace.
	preemption *defaultpreemption.DefaultPreemption

	mu sync.Mutex
	// active are the reclaims under way, by waiting unit.
	active map[string]*active
}

// active is a reclaim (or a preemption within a tenant) under way, until
// every pod of its unit is bound or it lapses.
type active struct {
	plan   *plan
	detail waits.ReclaimDetail
	// preempt is what a preemption within a tenant says; "" for a reclaim.
	preempt string
	until   time.Time
	// waiting are the unit's pods ("namespace/name") not bound yet.
	waiting map[string]bool
}

// Factory returns a constructor whose plugin shares caches and live with
// the other Rota plugins (nil: its own). Its evictor runs until the
// scheduler stops.
func Factory(caches *gpupool.Caches, live *gpuquota.Live) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		dra := h.SharedDRAManager()
		if dra == nil {
			return nil, fmt.Errorf("%s needs the scheduler's shared DRA manager (DynamicResourceAllocation disabled?)", Name)
		}
		dp, err := defaultpreemption.New(ctx, &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}, h,
			plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
		if err != nil {
			return nil, fmt.Errorf("%s: priority preemption: %w", Name, err)
		}
		dp.IsEligiblePod = sameTenant
		ev, err := evictor.New(evictor.Options{
			Client: h.ClientSet(), Recorder: h.EventRecorder(), Clock: clock.RealClock{}, Metrics: evictorMetrics(),
			Pods: h.SharedInformerFactory().Core().V1().Pods().Lister(),
		})
		if err != nil {
			return nil, fmt.Errorf("%s: evictor: %w", Name, err)
		}
		ev.Run(ctx, evictionWorkers)
		// Reclaim and Gang read a namespace's pods; kube-scheduler's pod
		// informer has no namespace index, and a lister without one walks
		// every pod (and logs so).
		podInf := h.SharedInformerFactory().Core().V1().Pods().Informer()
		if _, ok := podInf.GetIndexer().GetIndexers()[cache.NamespaceIndex]; !ok {
			if err := podInf.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}); err != nil {
				return nil, fmt.Errorf("%s: pod namespace index: %w", Name, err)
			}
		}
		return &Reclaim{
			handle: h, dra: dra, caches: gpupool.CachesOrNew(caches), live: gpuquota.LiveOrNew(live),
			pods: h.SharedInformerFactory().Core().V1().Pods().Lister(), pdbs: h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister(),
			evictor: ev, clock: clock.RealClock{}, preemption: dp, active: map[string]*active{},
		}, nil
	}
}

// sameTenant lets a pod preempt by priority only pods of its own namespace:
// another tenant's pods are taken only by a reclaim, and only what they
// borrowed.
func sameTenant(_ fwk.NodeInfo, victim preemption.Victim, preemptor *v1.Pod) bool {
	for _, p := range victim.Pods() {
		if p.GetPod().Namespace != preemptor.Namespace {
			return false
		}
	}
	return true
}

// Name implements fwk.Plugin.
func (pl *Reclaim) Name() string { return Name }

// PostFilter reclaims borrowed GPUs for a pod its tenant's guarantee
// covers, and otherwise preempts by priority within the pod's tenant.
// A reclaim returns Unschedulable with what it does: the pod is retried
// when its victims are gone, and the WaitReason plugin still explains the
// attempt.
func (pl *Reclaim) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if len(pod.Spec.ResourceClaims) > 0 {
		if why := pl.gangIncomplete(pod); why != "" {
			// Planned now, a reclaim would free room for the members that
			// exist only, and hold the unit until it lapses.
			return nil, fwk.NewStatus(fwk.Unschedulable, why)
		}
		if st := pl.reclaim(ctx, pod); st != nil {
			return nil, st
		}
	}
	return pl.preemption.PostFilter(ctx, cs, pod, m)
}

// gangIncomplete says why pod's gang cannot be reclaimed or preempted for
// yet: fewer of its members exist than its rota.dev/gang-size says. ""
// for a pod in no gang, a complete gang, or a size the Gang plugin refuses.
func (pl *Reclaim) gangIncomplete(pod *v1.Pod) string {
	name, ok := pod.Labels[gpuv1.GangLabel]
	if !ok {
		return ""
	}
	members, err := pl.pods.Pods(pod.Namespace).List(labels.SelectorFromSet(labels.Set{gpuv1.GangLabel: name}))
	if err != nil {
		return ""
	}
	return gangIncomplete(pod, members)
}

// gangIncomplete is (*Reclaim).gangIncomplete given the pods labelled with
// pod's gang.
func gangIncomplete(pod *v1.Pod, members []*v1.Pod) string {
	name := pod.Labels[gpuv1.GangLabel]
	size, err := strconv.Atoi(pod.Annotations[gpuv1.GangSizeAnnotation])
	if err != nil || size <= 0 {
		return ""
	}
	live := 0
	for _, m := range members {
		if m.DeletionTimestamp == nil {
			live++
		}
	}
	if live >= size {
		return ""
	}
	return fmt.Sprintf("gang %s has %d of %d members: no reclaim or preemption until the rest are created", name, live, size)
}

// reclaim plans and starts a reclaim for pod's unit, or a preemption by
// priority within its tenant when no guarantee covers it, or reports the
// one under way; nil when neither applies (kube-scheduler's preemption,
// restricted to the tenant, then looks at the pod's other resources).
func (pl *Reclaim) reclaim(ctx context.Context, pod *v1.Pod) *fwk.Status {
	logger := klog.FromContext(ctx)
	guaranteed := pl.guaranteed(pod.Namespace)
	mayPreempt := pl.mayPreempt(pod)
	if !guaranteed && !mayPreempt && !pl.anyUnderway() {
		// Neither a reclaim nor a preemption could start: skip the
		// snapshot, which costs a walk of the whole pool.
		return nil
	}
	b, pods, err := pl.builder(ctx)
	if err != nil {
		return fwk.AsStatus(err)
	}
	unit, err := b.Unit(pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	now := pl.clock.Now()
	if a := pl.underway(unit.Key, now); a != nil {
		if a.preempt != "" {
			return fwk.NewStatus(fwk.Unschedulable, a.preempt)
		}
		return fwk.NewStatus(fwk.Unschedulable, a.detail.Describe(now, pl.gone))
	}
	var p *plan
	if guaranteed {
		var why noPlan
		if p, why = makePlan(pl.live.Table(), b.Snapshot(), pods, unit, planMaxChecks); p == nil && why != "" {
			logger.V(3).Info("No reclaim", "pod", klog.KObj(pod), "reason", string(why))
		}
	}
	if p == nil {
		if mayPreempt {
			if pp := makePriorityPlan(b.Snapshot(), pods, unit, planMaxChecks); pp != nil {
				return pl.preempt(ctx, pod, unit, pp, now)
			}
		}
		return nil
	}
	until := now.Add(lapse)
	detail := waits.ReclaimDetail{Tenant: unit.Namespace, Unit: unit.Key, Model: p.Model, Need: p.Need, Used: p.Used, Guaranteed: p.Guaranteed, Started: now}
	var victims []evictor.Victim
	reclaimer := evictor.Reclaimer{Tenant: unit.Namespace, Pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}}
	if _, gang, ok := strings.Cut(unit.Key, "/gang:"); ok {
		reclaimer.Gang = gang
	}
	for _, v := range p.Victims {
		rv := waits.ReclaimVictim{Workload: v.Key, GPUs: v.GPUs}
		numbers := evictor.Numbers{Model: p.Model, ReclaimerHolds: int64(p.Used), ReclaimerGuarantee: int64(p.Guaranteed), ReclaimerNeeds: int64(p.Need),
			VictimHolds: int64(v.TenantUsed), VictimGuarantee: int64(v.TenantGuaranteed)}
		if len(v.Pods) == 1 {
			numbers.Taken = int64(v.GPUs)
		}
		for _, vp := range v.Pods {
			rv.Pods = append(rv.Pods, vp.Namespace+"/"+vp.Name)
			victims = append(victims, evictor.Victim{Pod: types.NamespacedName{Namespace: vp.Namespace, Name: vp.Name}, UID: vp.UID,
				Tenant: vp.Namespace, For: reclaimer, Numbers: numbers})
			if d, err := evictor.ParseDeclaration(vp.Annotations[gpuv1.CheckpointAnnotation]); err == nil && d.Grace > 0 {
				end := now.Add(d.Grace)
				if rv.GraceUntil == nil || end.After(*rv.GraceUntil) {
					rv.GraceUntil = &end
				}
				until = later(until, end.Add(lapse))
			}
		}
		detail.Victims = append(detail.Victims, rv)
	}
	pl.mu.Lock()
	pl.active[unit.Key] = &active{plan: p, detail: detail, until: until, waiting: unitPods(unit)}
	pl.mu.Unlock()
	pl.live.StartReclaim(p.Model, unit.Key, until)
	pl.evictor.Submit(victims)
	msg := detail.Describe(now, nil)
	pl.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, gpuv1.ReclaimingEventReason, "Reclaim", "%s", msg)
	pl.annotate(ctx, unit, detail)
	logger.Info("Reclaiming borrowed GPUs", "pod", klog.KObj(pod), "unit", unit.Key, "model", p.Model, "victims", len(p.Victims))
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// preempt evicts, checkpoint first, the lower-priority workloads of the
// unit's own tenant that p names.
func (pl *Reclaim) preempt(ctx context.Context, pod *v1.Pod, unit *advisor.Workload, p *plan, now time.Time) *fwk.Status {
	until := now.Add(lapse)
	parts := make([]string, 0, len(p.Victims))
	var victims []evictor.Victim
	reclaimer := evictor.Reclaimer{Tenant: unit.Namespace, Pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}}
	for _, v := range p.Victims {
		parts = append(parts, fmt.Sprintf("%s (%d GPUs, priority %d)", v.Key, v.GPUs, v.Priority))
		why := fmt.Sprintf("preempted within tenant %s for %s (priority %d > %d)", unit.Namespace, unit.Key, unit.Priority, v.Priority)
		for _, vp := range v.Pods {
			victims = append(victims, evictor.Victim{Pod: types.NamespacedName{Namespace: vp.Namespace, Name: vp.Name}, UID: vp.UID,
				Tenant: vp.Namespace, For: reclaimer, Why: why})
			if d, err := evictor.ParseDeclaration(vp.Annotations[gpuv1.CheckpointAnnotation]); err == nil {
				until = later(until, now.Add(d.Grace+lapse))
			}
		}
	}
	msg := fmt.Sprintf("preempting lower-priority workloads of %s: %s", unit.Namespace, strings.Join(parts, ", "))
	pl.mu.Lock()
	pl.active[unit.Key] = &active{plan: p, preempt: msg, until: until, waiting: unitPods(unit)}
	pl.mu.Unlock()
	pl.evictor.Submit(victims)
	pl.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, "Preempting", "Preempt", "%s", msg)
	klog.FromContext(ctx).Info("Preempting within the tenant", "pod", klog.KObj(pod), "unit", unit.Key, "victims", len(p.Victims))
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// guaranteed reports whether the namespace is guaranteed GPUs of some
// model: only then can its pods reclaim.
func (pl *Reclaim) guaranteed(namespace string) bool {
	t := pl.live.Table().Tenant(namespace)
	if t == nil {
		return false
	}
	for _, terms := range t.Models {
		if terms.Guaranteed > 0 {
			return true
		}
	}
	return false
}

// mayPreempt reports whether pod may preempt by priority and some bound
// pod of its namespace with a claim has a lower priority.
func (pl *Reclaim) mayPreempt(pod *v1.Pod) bool {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return false
	}
	prio := corev1helpers.PodPriority(pod)
	others, err := pl.pods.Pods(pod.Namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	for _, o := range others {
		if o.Spec.NodeName != "" && o.DeletionTimestamp == nil && len(o.Spec.ResourceClaims) > 0 && corev1helpers.PodPriority(o) < prio {
			return true
		}
	}
	return false
}

// anyUnderway reports whether some reclaim or preemption is under way.
func (pl *Reclaim) anyUnderway() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.active) > 0
}

// unitPods are the keys of a unit's pods.
func unitPods(unit *advisor.Workload) map[string]bool {
	out := map[string]bool{}
	for _, g := range unit.Groups {
		for _, k := range g.Pods {
			out[k] = true
		}
	}
	return out
}

// underway returns the reclaim under way for unit; one that lapsed is
// over.
func (pl *Reclaim) underway(unit string, now time.Time) *active {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	a := pl.active[unit]
	if a == nil {
		return nil
	}
	if now.After(a.until) {
		delete(pl.active, unit)
		if a.preempt == "" {
			pl.live.EndReclaim(a.plan.Model, unit)
		}
		return nil
	}
	return a
}

// PostBind ends a reclaim once every pod of its unit is bound: the model
// may be borrowed again.
func (pl *Reclaim) PostBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	key := pod.Namespace + "/" + pod.Name
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for unit, a := range pl.active {
		if !a.waiting[key] {
			continue
		}
		delete(a.waiting, key)
		if len(a.waiting) == 0 {
			delete(pl.active, unit)
			if a.preempt == "" {
				pl.live.EndReclaim(a.plan.Model, unit)
			}
			klog.FromContext(ctx).V(2).Info("Reclaim done", "unit", unit, "model", a.plan.Model)
		}
	}
}

// gone reports whether every pod of a victim is gone or terminating.
func (pl *Reclaim) gone(v waits.ReclaimVictim) bool {
	for _, key := range v.Pods {
		ns, name, _ := strings.Cut(key, "/")
		if cur, err := pl.pods.Pods(ns).Get(name); err == nil && cur.DeletionTimestamp == nil {
			return false
		}
	}
	return true
}

// annotate writes the reclaim on the unit's waiting pods for `kubectl rota
// why`, off the scheduling cycle.
func (pl *Reclaim) annotate(ctx context.Context, unit *advisor.Workload, detail waits.ReclaimDetail) {
	raw, err := json.Marshal(detail)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Encoding the reclaim detail")
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{gpuv1.ReclaimAnnotation: string(raw)}}})
	if err != nil {
		return
	}
	client := pl.handle.ClientSet()
	logger := klog.FromContext(ctx)
	var keys []string
	for _, g := range unit.Groups {
		keys = append(keys, g.Pods...)
	}
	go func() {
		for _, key := range keys {
			ns, name, _ := strings.Cut(key, "/")
			if _, err := client.CoreV1().Pods(ns).Patch(context.WithoutCancel(ctx), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				logger.V(2).Info("Writing the reclaim detail failed", "pod", key, "err", err)
			}
		}
	}()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// builder builds the advisor's snapshot from the scheduler's informers;
// it returns the pods it read, by "namespace/name".
func (pl *Reclaim) builder(ctx context.Context) (*advisor.Builder, map[string]*v1.Pod, error) {
	o, err := advisorinput.Read(ctx, pl.dra, pl.caches, pl.pods, pl.pdbs)
	if err != nil {
		return nil, nil, err
	}
	o.Limits = pl.live.Table().Limits()
	b, err := advisor.NewBuilder(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	pods := make(map[string]*v1.Pod, len(o.Pods))
	for _, p := range o.Pods {
		pods[p.Namespace+"/"+p.Name] = p
	}
	return b, pods, nil
}
