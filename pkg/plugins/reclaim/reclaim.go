package reclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/pkg/waits"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Reclaim"

// planMaxChecks bounds the advisor's move search for one reclaim.
const planMaxChecks = 20000

// lapse is how long a reclaim keeps its model from borrowers beyond the
// longest checkpoint grace of its victims: time for the evictions and for
// the unit to be placed once they are done.
const lapse = 2 * time.Minute

var _ fwk.PostFilterPlugin = &Reclaim{}

// Evictor evicts a reclaim's victims, each after its checkpoint.
type Evictor interface {
	// Submit queues the victims; one already queued is not queued again.
	Submit(ctx context.Context, victims []Victim)
}

// Victim is one pod to evict and why.
type Victim struct {
	Pod *v1.Pod
	// Tenant is the namespace whose guarantee reclaims it; Unit the
	// waiting pod or gang.
	Tenant, Unit string
	// Message is the numbers, for the victim's Events.
	Message string
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

// active is a reclaim under way.
type active struct {
	plan   *plan
	detail waits.ReclaimDetail
	until  time.Time
}

// Factory returns a constructor whose plugin shares caches and live with
// the other Rota plugins (nil: its own) and evicts through newEvictor,
// called once with the scheduler's handle.
func Factory(caches *gpupool.Caches, live *gpuquota.Live, newEvictor func(context.Context, fwk.Handle) (Evictor, error)) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
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
		ev, err := newEvictor(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("%s: evictor: %w", Name, err)
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
	if pl.live.Table().AnyGuarantees() && len(pod.Spec.ResourceClaims) > 0 {
		if st := pl.reclaim(ctx, pod); st != nil {
			return nil, st
		}
	}
	return pl.preemption.PostFilter(ctx, cs, pod, m)
}

// reclaim plans and starts a reclaim for pod's unit, or reports the one
// under way; nil when no guarantee covers the pod.
func (pl *Reclaim) reclaim(ctx context.Context, pod *v1.Pod) *fwk.Status {
	logger := klog.FromContext(ctx)
	b, err := pl.builder(ctx)
	if err != nil {
		return fwk.AsStatus(err)
	}
	unit, err := b.Unit(pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	now := pl.clock.Now()
	if a := pl.underway(unit.Key, now); a != nil {
		return fwk.NewStatus(fwk.Unschedulable, a.detail.Describe(now, pl.gone))
	}
	pods := map[string]*v1.Pod{}
	all, err := pl.pods.List(labels.Everything())
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("list pods: %w", err))
	}
	for _, p := range all {
		pods[p.Namespace+"/"+p.Name] = p
	}
	p, why := makePlan(pl.live.Table(), b.Snapshot(), pods, unit, planMaxChecks)
	if p == nil {
		if why != "" {
			logger.V(3).Info("No reclaim", "pod", klog.KObj(pod), "reason", string(why))
		}
		return nil
	}
	until := now.Add(lapse)
	detail := waits.ReclaimDetail{Tenant: unit.Namespace, Unit: unit.Key, Model: p.Model, Need: p.Need, Used: p.Used, Guaranteed: p.Guaranteed, Started: now}
	var victims []Victim
	for _, v := range p.Victims {
		msg := victimMessage(p, v, unit)
		rv := waits.ReclaimVictim{Workload: v.Key, GPUs: v.GPUs}
		for _, vp := range v.Pods {
			rv.Pods = append(rv.Pods, vp.Namespace+"/"+vp.Name)
			victims = append(victims, Victim{Pod: vp, Tenant: unit.Namespace, Unit: unit.Key, Message: msg})
			if grace, ok := declaredGrace(vp); ok {
				end := now.Add(grace)
				if rv.GraceUntil == nil || end.After(*rv.GraceUntil) {
					rv.GraceUntil = &end
				}
				until = later(until, end.Add(lapse))
			}
		}
		detail.Victims = append(detail.Victims, rv)
	}
	pl.mu.Lock()
	pl.active[unit.Key] = &active{plan: p, detail: detail, until: until}
	pl.mu.Unlock()
	pl.live.StartReclaim(p.Model, unit.Key, until)
	pl.evictor.Submit(ctx, victims)
	msg := detail.Describe(now, nil)
	pl.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, gpuv1.ReclaimingEventReason, "Reclaim", "%s", msg)
	pl.annotate(ctx, unit, detail)
	logger.Info("Reclaiming borrowed GPUs", "pod", klog.KObj(pod), "unit", unit.Key, "model", p.Model, "victims", len(p.Victims))
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// underway returns the reclaim under way for unit; a reclaim whose
// victims are all gone, or that lapsed, is over.
func (pl *Reclaim) underway(unit string, now time.Time) *active {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	a := pl.active[unit]
	if a == nil {
		return nil
	}
	if now.After(a.until) || pl.victimsGone(a.plan) {
		delete(pl.active, unit)
		pl.live.EndReclaim(a.plan.Model, unit)
		return nil
	}
	return a
}

func (pl *Reclaim) victimsGone(p *plan) bool {
	for _, v := range p.Victims {
		for _, vp := range v.Pods {
			if cur, err := pl.pods.Pods(vp.Namespace).Get(vp.Name); err == nil && cur.UID == vp.UID {
				return false
			}
		}
	}
	return true
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

// victimMessage is the numbers a victim's Events carry.
func victimMessage(p *plan, v victim, unit *advisor.Workload) string {
	return fmt.Sprintf("reclaimed for tenant %s's guarantee: %s holds %d of its %d guaranteed %s and %s needs %d; %s holds %d %s with %d guaranteed, %d borrowed; this workload holds %d",
		unit.Namespace, unit.Namespace, p.Used, p.Guaranteed, p.Model, unit.Key, p.Need,
		v.Namespace, v.TenantUsed, p.Model, v.TenantGuaranteed, max(0, v.TenantUsed-v.TenantGuaranteed), v.GPUs)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// builder builds the advisor's snapshot from the scheduler's informers.
func (pl *Reclaim) builder(ctx context.Context) (*advisor.Builder, error) {
	pool, err := gpupool.Snapshot(ctx, pl.dra, &pl.caches.Slices)
	if err != nil {
		return nil, err
	}
	pods, err := pl.pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	pdbs, err := pl.pdbs.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	return advisor.NewBuilder(ctx, advisor.Objects{
		Pool: pool, Classes: pl.dra.DeviceClasses(), CEL: pl.caches.CEL, Matches: pl.caches.Matches,
		Pods: pods, PDBs: pdbs, Limits: pl.live.Table().Limits(),
		Claim: func(ns, name string) (*resourceapi.ResourceClaim, error) {
			return pl.dra.ResourceClaims().Get(ns, name)
		},
	})
}

// declaredGrace is the checkpoint grace a pod declares; false when it
// declares none (or an invalid one: the evictor evicts it as undeclared).
func declaredGrace(pod *v1.Pod) (time.Duration, bool) {
	for _, part := range strings.Split(pod.Annotations[gpuv1.CheckpointAnnotation], ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "grace="); ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				return d, true
			}
		}
	}
	return 0, false
}
