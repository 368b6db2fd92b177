// Package waitreason implements Rota's WaitReason scheduler plugin: after
// every failed attempt it classifies why the pod waits into one
// machine-readable reason (pkg/waits) with numbers, keeps the pod's
// rota.dev/Waiting condition and an Event current, and clears the
// condition once the pod is placed. Off the scheduling cycle, a worker
// computes the pod's unblock advice (pkg/advisor) and adds it.
package waitreason

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/utils/clock"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/reservation"
	"github.com/rota-dev/rota/pkg/waits"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "WaitReason"

var (
	_ fwk.PostFilterPlugin = &WaitReason{}
	_ fwk.ReservePlugin    = &WaitReason{}
	_ fwk.PostBindPlugin   = &WaitReason{}
)

// WaitReason is the plugin.
type WaitReason struct {
	handle fwk.Handle
	dra    fwk.SharedDRAManager
	pods   corelisters.PodLister
	pdbs   policylisters.PodDisruptionBudgetLister
	writer *waits.Writer
	clock  clock.PassiveClock
	// caches are the slice index, compiled selectors and match results,
	// shared with the scheduler's other Rota plugins.
	caches *gpupool.Caches
	// causes records the cause of each pod's wait for the other plugins.
	causes  *waits.Causes
	metrics *pluginMetrics
	// waiting tracks the waiting pods for the per-model wait metrics.
	waiting *waitingPods
	// advice queues waiting pods for the unblock advice (advice.go);
	// schedules and owners feed its DeploySchedule releases.
	advice      workqueue.TypedInterface[types.NamespacedName]
	adviceClock clock.PassiveClock
	schedules   cache.GenericLister
	owners      *reservation.Owners
	// claimIndex is the claim informer's store, with gpupool.ClaimsByDeviceIndex.
	claimIndex cache.Indexer
	// candidates are the devices each tier's selectors accept in the
	// current slice view.
	candidates waits.CandidateCache
	// changes counts the events a classification depends on, verdicts
	// keeps each waiting pod's last one (reuse.go).
	changes  atomic.Uint64
	verdicts *verdicts
}

// New builds the plugin, with caches of its own. It takes no args.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return Factory(nil, nil)(ctx, obj, h)
}

// Factory returns a constructor whose plugin keeps its slice index,
// compiled selectors and match results in caches, shared with the other
// Rota plugins of the scheduler, and records the cause of each pod's wait
// in causes for them (Fairness); nil gives the plugin caches (or a record)
// of its own.
func Factory(caches *gpupool.Caches, causes *waits.Causes) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return FactoryWithAdviceClock(caches, causes, nil)
}

// FactoryWithAdviceClock is Factory whose unblock advice reads "now" (for
// the DeploySchedule transitions to come) from adviceClock; nil is the
// real clock. The sandbox passes its virtual clock.
func FactoryWithAdviceClock(caches *gpupool.Caches, causes *waits.Causes, adviceClock clock.PassiveClock) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		pl, err := newWithClock(ctx, h, clock.RealClock{}, gpupool.CachesOrNew(caches), waits.CausesOrNew(causes))
		if err != nil {
			return nil, err
		}
		if adviceClock != nil {
			pl.adviceClock = adviceClock
		}
		return pl, nil
	}
}

func newWithClock(ctx context.Context, h fwk.Handle, clk clock.PassiveClock, caches *gpupool.Caches, causes *waits.Causes) (*WaitReason, error) {
	dra := h.SharedDRAManager()
	if dra == nil {
		return nil, fmt.Errorf("%s needs the scheduler's shared DRA manager (DynamicResourceAllocation disabled?)", Name)
	}
	pl := &WaitReason{
		handle:      h,
		dra:         dra,
		pods:        h.SharedInformerFactory().Core().V1().Pods().Lister(),
		pdbs:        h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister(),
		writer:      waits.NewWriter(h.ClientSet(), h.EventRecorder(), clk),
		clock:       clk,
		adviceClock: clk,
		caches:      caches,
		causes:      causes,
		metrics:     registerMetrics(),
		advice:      newAdviceQueue(),
		verdicts:    newVerdicts(),
	}
	pl.waiting = newWaitingPods(clk, pl.metrics)
	claims := h.SharedInformerFactory().Resource().V1().ResourceClaims().Informer()
	if err := gpupool.AddClaimsByDeviceIndex(claims); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	pl.claimIndex = claims.GetIndexer()
	if err := pl.watchChanges(h); err != nil {
		return nil, fmt.Errorf("%s: watch changes: %w", Name, err)
	}
	_, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				pl.writer.Forget(p.Namespace, p.Name)
				pl.causes.Forget(p.UID)
				pl.waiting.deleted(p.UID)
				pl.verdicts.forget(p.UID)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch pod deletions: %w", err)
	}
	if err := pl.watchStarts(ctx, h); err != nil {
		return nil, err
	}
	if err := pl.watchSchedules(ctx, h); err != nil {
		return nil, err
	}
	pl.writer.Run(ctx, 2)
	pl.runAdvice(ctx)
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *WaitReason) Name() string { return Name }

// PostFilter classifies the failed attempt, records the reason on the pod
// (asynchronously) and adds it to the scheduler's failure message. It
// never nominates a node.
func (pl *WaitReason) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	v, err := pl.classify(ctx, cs, pod, statuses)
	if err != nil {
		logger.V(3).Info("Could not classify wait", "pod", klog.KObj(pod), "err", err)
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	pl.causes.Set(pod.UID, v.Detail.Cause)
	pl.writer.Wait(pod, v)
	pl.waiting.waits(pod.UID, v)
	pl.adviseLater(pod)
	pl.metrics.waits.WithLabelValues(string(v.Reason), pod.Namespace).Inc()
	logger.V(3).Info("Pod waits", "pod", klog.KObj(pod), "reason", v.Reason, "message", v.Message)
	// Always Unschedulable: UnschedulableAndUnresolvable would make the
	// framework drop the other PostFilter plugins' explanations (Tiering's
	// per-tier analysis) from the pod's message, and it does not change
	// when the pod is retried (the Filter statuses decide that).
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %s", v.Reason, v.Message))
}

// classify gathers what the attempt says and runs waits.Classify on it,
// or reuses the pod's last verdict when nothing it depends on changed
// (reuse.go). Devices are counted from the cycle's inventory, only on the
// nodes that have a device some tier of the pod accepts.
func (pl *WaitReason) classify(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (waits.Verdict, error) {
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return waits.Verdict{}, fmt.Errorf("list nodes: %w", err)
	}
	a := waits.Attempt{Rejections: map[string]string{}}
	dra := map[string]bool{}
	for _, ni := range nodes {
		name := ni.Node().Name
		st := statuses.Get(name)
		if st == nil || st.IsSuccess() {
			continue
		}
		// An admission answer is read from the refusal its plugin recorded,
		// never from the status text; any other status is a rejection of
		// the node, in the plugin's words.
		if r, ok := cyclestate.RefusalOf(cs, st.Plugin(), name); ok && a.Admit(r) {
			continue
		}
		if st.Plugin() == dynamicresources.Name {
			dra[name] = true
			continue
		}
		a.Rejections[name] = st.Plugin() + ": " + strings.Join(st.Reasons(), "; ")
	}
	requests, err := gpupool.PodRequests(pl.dra, pod)
	if err != nil {
		return waits.Verdict{}, err
	}
	inv, err := gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices)
	if err != nil {
		return waits.Verdict{}, err
	}
	// Each tier's matcher, or the error that names why it has none.
	matchers := make([][]*gpupool.Matcher, len(requests))
	matchErrs := make([][]error, len(requests))
	key := reuseKey{view: inv.Slices, gang: gangOf(pod)}
	for ri, r := range requests {
		matchers[ri] = make([]*gpupool.Matcher, len(r.Tiers))
		matchErrs[ri] = make([]error, len(r.Tiers))
		for i := range r.Tiers {
			m, err := gpupool.NewMatcher(pl.dra.DeviceClasses(), pl.caches.CEL, pl.caches.Matches, r.Tiers[i])
			if err != nil {
				matchErrs[ri][i] = err
				key.matchers = append(key.matchers, "error: "+err.Error())
				continue
			}
			matchers[ri][i] = m
			key.matchers = append(key.matchers, m.Key())
		}
	}
	key.attemptKey(&a, dra)
	changes, reusable := changesOf(cs)
	key.changes = changes
	if reusable {
		if v, ok := pl.verdicts.get(pod.UID, &key); ok {
			return v, nil
		}
	}
	pl.verdicts.counted.Add(1)
	prio := podPriority(pod)
	holders := newHolderInfo(pl.pods, pl.pdbs)
	held := newClaimHolders(pl.claimIndex, pl.dra.ResourceClaims())
	for ri, r := range requests {
		var tiers []waits.TierCounts
		for i := range r.Tiers {
			m := matchers[ri][i]
			if m == nil {
				tiers = append(tiers, waits.TierCounts{Label: waits.TierLabel(r, i) + " (" + matchErrs[ri][i].Error() + ")", Need: int(r.Tiers[i].Count)})
				continue
			}
			cands := pl.candidates.Get(ctx, inv.Slices, m)
			tc := waits.CountCandidates(inv, cands, r, i, prio, pod.Namespace, holders, held)
			for node, free := range tc.Free {
				if free >= tc.Need && dra[node] {
					a.DeviceConstraintNodes = append(a.DeviceConstraintNodes, node)
				}
			}
			tiers = append(tiers, tc)
		}
		a.Requests = append(a.Requests, tiers)
	}
	v := waits.Classify(a)
	// A gang member that cannot be placed keeps its whole gang waiting:
	// the admission answer is GangIncomplete, with the pool's reason.
	if g := pod.Labels[gpuv1.GangLabel]; g != "" && v.Reason != waits.GangIncomplete && v.Reason != waits.NotAttempted && v.Reason != waits.QuotaExceeded && v.Reason != waits.ReservationOvercommitted {
		detail := v.Detail
		detail.Headline = fmt.Sprintf("gang %s cannot be admitted whole: %s: %s", g, v.Reason, detail.Headline)
		v = waits.Verdict{Reason: waits.GangIncomplete, Unresolvable: v.Unresolvable, Detail: detail,
			Message: fmt.Sprintf("gang %s cannot be admitted whole: %s: %s", g, v.Reason, v.Message)}
	}
	if reusable {
		pl.verdicts.put(pod.UID, key, v)
	}
	return v, nil
}

func podPriority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// PostBind clears the waiting condition and records admission metrics:
// time from creation to binding, and whether a tiered claim fell back.
func (pl *WaitReason) PostBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.causes.Forget(pod.UID)
	pl.verdicts.forget(pod.UID)
	pl.waiting.placed(pod.UID)
	pl.writer.Placed(pod, nodeName)
	pl.metrics.timeToAdmission.WithLabelValues(pod.Namespace).Observe(pl.clock.Since(pod.CreationTimestamp.Time).Seconds())
	for _, fellBack := range pl.tierOutcomes(pod) {
		pl.metrics.tieredPlacements.WithLabelValues(pod.Namespace, fmt.Sprint(fellBack)).Inc()
	}
	klog.FromContext(ctx).V(4).Info("Pod placed", "pod", klog.KObj(pod), "node", nodeName, "after", pl.clock.Since(pod.CreationTimestamp.Time).Round(time.Millisecond))
}

// tierOutcomes reports, for each allocated firstAvailable request of the
// pod's claims, whether a tier other than the first was granted.
func (pl *WaitReason) tierOutcomes(pod *v1.Pod) []bool {
	var out []bool
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		claim, err := pl.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil || claim.Status.Allocation == nil {
			continue
		}
		out = append(out, fallbacks(claim)...)
	}
	return out
}

// fallbacks lists, per allocation result of a firstAvailable request,
// whether its subrequest was not the first.
func fallbacks(claim *resourceapi.ResourceClaim) []bool {
	first := map[string]string{}
	for _, r := range claim.Spec.Devices.Requests {
		if len(r.FirstAvailable) > 0 {
			first[r.Name] = r.FirstAvailable[0].Name
		}
	}
	var out []bool
	seen := map[string]bool{}
	for _, res := range claim.Status.Allocation.Devices.Results {
		req, sub, ok := strings.Cut(res.Request, "/")
		if !ok || seen[req] {
			continue
		}
		if f, tiered := first[req]; tiered {
			seen[req] = true
			out = append(out, sub != f)
		}
	}
	return out
}
