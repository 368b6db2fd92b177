// Package reservation implements Rota's Reservation scheduler plugin: it
// keeps the members of a GPUReservation on the reservation's node and keeps
// everyone else off the reserved GPUs, and admits time-sliced members only
// while their declared VRAM (GpuConfig memoryMiB) fits the reservation's
// budget.
//
// The reserved GPUs carry a DeviceTaintRule taint (rota.dev/reserved=
// <namespace>.<name>, written by pkg/reservation), so the in-tree
// DynamicResources allocator never gives them to a claim without the
// matching toleration. A toleration is just text in a claim, though; this
// plugin is what makes membership real: a pod whose claims tolerate a
// reservation must belong, through its controller chain (ReplicaSet ->
// Deployment, StatefulSet -> LeaderWorkerSet, StatefulSet, Job, each hop
// verified by UID and selector), to one of the reservation's members.
package reservation

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/plugins/refusalmemo"
	rsv "github.com/rota-dev/rota/pkg/reservation"
	"github.com/rota-dev/rota/pkg/waits"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Reservation"

var (
	_ fwk.PreFilterPlugin   = &Reservation{}
	_ fwk.FilterPlugin      = &Reservation{}
	_ fwk.ReservePlugin     = &Reservation{}
	_ fwk.PostBindPlugin    = &Reservation{}
	_ fwk.EnqueueExtensions = &Reservation{}
	_ fwk.SignPlugin        = &Reservation{}
)

const preFilterStateKey fwk.StateKey = "PreFilter" + Name

// Reasons a pod is refused, at the start of each message.
const (
	ReasonOvercommitted = "ReservationOvercommitted"
	ReasonNotMember     = "ReservationNotMember"
	ReasonNotTolerated  = "ReservationNotTolerated"
	ReasonNoMemory      = "ReservationMemoryMissing"
	ReasonNotHeld       = "ReservationNotHeld"
	ReasonArgsConflict  = "ReservationArgsConflict"
)

// Reservation is the plugin.
type Reservation struct {
	claims claimTracker
	// claimIndex is the scheduler's ResourceClaim informer's store, with
	// claimIndexers: it says which claims may hold a reservation's GPUs,
	// whose allocations claims (the tracker) then gives.
	claimIndex cache.Indexer
	// inflight are the claims allocated in Reserve that claimIndex may not
	// place near their reservation yet.
	inflight inflightClaims
	owners   *rsv.Owners
	// reservations is the GPUReservation informer's store: typed objects
	// (toTypedReservation) indexed by member (reservationIndexers).
	reservations cache.Indexer
	synced       cache.InformerSynced
	// loads activates the pods refused while the plugin's own caches were
	// still syncing (nil in unit tests: refused pods are not activated).
	loads   *loadGate
	metrics *pluginMetrics
	// refused remembers, per pod, a refusal Reserve made on the devices the
	// allocator actually chose, so that the next attempt is refused in
	// Filter (and explained) while nothing it depends on has changed.
	refused *refusalmemo.Memo
}

// New builds the plugin. Reservations (and LeaderWorkerSets, where the
// cluster serves them) are read through dynamic informers of the plugin's
// own (Rota has no generated clientset), with a client made from the
// scheduler's kubeconfig; they start here and stop with the scheduler. The
// workloads a pod's controller chain passes through are read from the
// scheduler's shared informers.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return Factory(nil)(ctx, obj, h)
}

// Factory returns a constructor whose plugin reads Reservations (and
// LeaderWorkerSets) through dyn instead of a client made from the
// scheduler's kubeconfig; nil is New. A scheduler run against fake
// clientsets has no kubeconfig and passes a fake dynamic client.
func Factory(dyn dynamic.Interface) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newWithDynamic(ctx, h, dyn)
	}
}

func newWithDynamic(ctx context.Context, h fwk.Handle, dyn dynamic.Interface) (fwk.Plugin, error) {
	dra := h.SharedDRAManager()
	if dra == nil {
		return nil, fmt.Errorf("%s needs the scheduler's shared DRA manager (DynamicResourceAllocation disabled?)", Name)
	}
	if dyn == nil {
		if h.KubeConfig() == nil {
			return nil, fmt.Errorf("%s needs the scheduler's kubeconfig or a dynamic client (Factory)", Name)
		}
		var err error
		if dyn, err = dynamic.NewForConfig(h.KubeConfig()); err != nil {
			return nil, fmt.Errorf("%s: dynamic client: %w", Name, err)
		}
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(rotav1.GPUReservationsResource).Informer()
	// The factory is the plugin's own and starts below: the transform and
	// the index are in place before the first object arrives.
	if err := inf.SetTransform(toTypedReservation); err != nil {
		return nil, fmt.Errorf("%s: GPUReservation transform: %w", Name, err)
	}
	if err := inf.AddIndexers(reservationIndexers()); err != nil {
		return nil, fmt.Errorf("%s: GPUReservation indexes: %w", Name, err)
	}
	shared := h.SharedInformerFactory()
	claimInf := shared.Resource().V1().ResourceClaims().Informer()
	if err := addClaimIndexers(claimInf); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	owners := &rsv.Owners{
		ReplicaSets:  shared.Apps().V1().ReplicaSets().Lister(),
		Deployments:  shared.Apps().V1().Deployments().Lister(),
		StatefulSets: shared.Apps().V1().StatefulSets().Lister(),
		Jobs:         shared.Batch().V1().Jobs().Lister(),
		Pods:         shared.Core().V1().Pods().Lister(),
	}
	synced := []cache.InformerSynced{inf.HasSynced}
	if servesLeaderWorkerSets(ctx, h) {
		lws := factory.ForResource(rotav1.LeaderWorkerSetsResource)
		owners.LeaderWorkerSets, owners.LeaderWorkerSetsSynced = lws.Lister(), lws.Informer().HasSynced
		synced = append(synced, lws.Informer().HasSynced)
	}
	pl := &Reservation{
		claims:       dra.ResourceClaims(),
		claimIndex:   claimInf.GetIndexer(),
		owners:       owners,
		reservations: inf.GetIndexer(),
		synced:       inf.HasSynced,
		metrics:      registerMetrics(),
		refused:      refusalmemo.New(h),
	}
	if _, err := claimInf.AddEventHandler(pl.inflight.handler()); err != nil {
		return nil, fmt.Errorf("%s: claim event handler: %w", Name, err)
	}
	factory.Start(ctx.Done())
	pl.loads = newLoadGate(ctx, h, synced...)
	klog.FromContext(ctx).V(2).Info("Reservation plugin configured", "leaderWorkerSets", owners.LeaderWorkerSets != nil)
	return pl, nil
}

// servesLeaderWorkerSets asks discovery once whether the cluster serves
// LeaderWorkerSets: a pod chain through one can only be verified then, and
// an informer on an API that is not served would retry for ever.
func servesLeaderWorkerSets(ctx context.Context, h fwk.Handle) bool {
	if h.ClientSet() == nil {
		return false
	}
	if _, err := h.ClientSet().Discovery().ServerResourcesForGroupVersion(rotav1.LeaderWorkerSetGroupVersion); err != nil {
		klog.FromContext(ctx).V(2).Info("LeaderWorkerSets are not served; their pods cannot be reservation members", "err", err)
		return false
	}
	return true
}

// waitForLoad records pod as refused until the plugin's caches sync, and
// says whether to refuse it: false means they synced in the meantime.
func (pl *Reservation) waitForLoad(pod *v1.Pod) bool {
	if pl.loads == nil {
		return true
	}
	return pl.loads.wait(pod)
}

// Name implements fwk.Plugin.
func (pl *Reservation) Name() string { return Name }

// claimTracker is the part of the scheduler's DRA claim tracker the plugin
// reads: claims as the scheduler sees them (allocations written or assumed
// after the API call) and the allocations between Reserve and PreBind. It
// never lists them: claimIndex says which to get.
type claimTracker interface {
	Get(namespace, name string) (*resourceapi.ResourceClaim, error)
	GetPendingAllocation(claimUID types.UID) *resourceapi.AllocationResult
}

// preFilterState is what PreFilter learned about a member pod. It never
// changes afterwards, so Clone shares it.
type preFilterState struct {
	res        *rotav1.GPUReservation
	member     string
	timeSliced bool
	// demand is, for a time-sliced reservation, what each request of the
	// pod's unallocated claims would cost each GPU it gets.
	demand []requestDemand
	// claims are the pod's unallocated claims, allocated by this cycle.
	claims []*resourceapi.ResourceClaim
}

func (s *preFilterState) Clone() fwk.StateData { return s }

// getPreFilterState returns nil when the pod is not a member (PreFilter
// skipped it).
func getPreFilterState(cs fwk.CycleState) (*preFilterState, error) {
	data, err := cs.Read(preFilterStateKey)
	if err != nil {
		return nil, nil //nolint:nilerr // PreFilter skipped this pod: not a member
	}
	s, ok := data.(*preFilterState)
	if !ok {
		return nil, fmt.Errorf("%q in cycle state has type %T, want *preFilterState", preFilterStateKey, data)
	}
	return s, nil
}

// unresolvable refuses a pod on node ("" for every node: PreFilter) for a
// reason no other node can fix; the status reads "<reason>: <details>".
// The refusals that are admission answers are recorded for the WaitReason
// plugin (cyclestate.Refuse) with the wait reason each makes: a budget the
// pod would exceed, or vLLM arguments that would (ReservationOvercommitted),
// and a reservation's GPUs the pod may not use (Reserved). The others
// (ReservationMemoryMissing) are rejections WaitReason reports as such.
func unresolvable(ctx context.Context, cs fwk.CycleState, node string, pod *v1.Pod, reason, format string, args ...any) *fwk.Status {
	details := fmt.Sprintf(format, args...)
	klog.FromContext(ctx).V(3).Info("Refusing pod", "pod", klog.KObj(pod), "node", node, "reason", reason, "message", details)
	const code = fwk.UnschedulableAndUnresolvable
	switch reason {
	case ReasonOvercommitted:
		return cyclestate.Refuse(cs, Name, node, code, reason+": ", waits.Refusal{Reason: waits.ReservationOvercommitted, Message: details})
	case ReasonArgsConflict:
		return cyclestate.Refuse(cs, Name, node, code, "", waits.Refusal{Reason: waits.ReservationOvercommitted, Message: reason + ": " + details})
	case ReasonNotMember, ReasonNotTolerated:
		return cyclestate.Refuse(cs, Name, node, code, "", waits.Refusal{Reason: waits.Reserved, Message: reason + ": " + details})
	}
	return fwk.NewStatus(code, reason+": "+details)
}

// podClaims returns the pod's claims that exist; missing ones are left to
// DynamicResources, which explains them.
func (pl *Reservation) podClaims(pod *v1.Pod) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		claim, err := pl.claims.Get(pod.Namespace, *name)
		if err != nil {
			continue
		}
		out = append(out, claim)
	}
	return out
}

// PreFilter resolves membership. A pod whose claims tolerate no reservation
// and whose workload is no reservation's member is skipped. A pod that
// tolerates a reservation it does not belong to is refused; so is a member
// whose claims do not tolerate its reservation, or that declares no
// memoryMiB for a time-sliced one. A member is limited to the
// reservation's node.
func (pl *Reservation) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	claims := pl.podClaims(pod)
	tolerated := sets.New[string]()
	for _, c := range claims {
		values, wildcard := rsv.ClaimTolerations(c)
		if wildcard {
			pl.metrics.refusals.WithLabelValues(ReasonNotMember).Inc()
			return nil, unresolvable(ctx, cs, "", pod, ReasonNotMember,
				"claim %s tolerates every %s taint (operator Exists or an empty key); a claim may tolerate only its own reservation, %s=<namespace>.<name>",
				c.Name, gpuv1.ReservedTaintKey, gpuv1.ReservedTaintKey)
		}
		tolerated.Insert(values...)
	}
	if !pl.synced() {
		if tolerated.Len() == 0 {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		if pl.waitForLoad(pod) {
			return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNotHeld+": GPUReservations are not loaded yet")
		}
	}
	w, err := pl.owners.WorkloadOf(pod)
	if errors.Is(err, rsv.ErrNotLoaded) {
		if pl.waitForLoad(pod) {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: pod's controller chain: %v", ReasonNotHeld, err))
		}
		w, err = pl.owners.WorkloadOf(pod) // synced since
	}
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if st := pl.checkTolerated(ctx, cs, pod, w, tolerated); st != nil {
		return nil, st
	}
	res, member, err := pl.reservationOf(pod.Namespace, w, tolerated)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if res == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s, st := pl.admitMember(ctx, cs, pod, claims, res, member)
	if st != nil {
		return nil, st
	}
	cs.Write(preFilterStateKey, s)
	return &fwk.PreFilterResult{NodeNames: sets.New(res.Spec.NodeName)}, nil
}

// checkTolerated refuses a pod whose claims tolerate a reservation it is
// not a member of, or that is not one of the pod's namespace.
func (pl *Reservation) checkTolerated(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, w rsv.Workload, tolerated sets.Set[string]) *fwk.Status {
	for _, v := range sets.List(tolerated) {
		ns, name, ok := gpuv1.ParseReservedTaintValue(v)
		if !ok || ns != pod.Namespace {
			pl.metrics.refusals.WithLabelValues(ReasonNotMember).Inc()
			return unresolvable(ctx, cs, "", pod, ReasonNotMember,
				"a claim tolerates %s=%s, which is not a reservation of namespace %s; only members of a reservation, in its namespace, may use its GPUs",
				gpuv1.ReservedTaintKey, v, pod.Namespace)
		}
		res, err := pl.get(ns, name)
		if err != nil {
			return fwk.AsStatus(err)
		}
		if res != nil && rsv.MemberName(res, w) == "" {
			pl.metrics.refusals.WithLabelValues(ReasonNotMember).Inc()
			return unresolvable(ctx, cs, "", pod, ReasonNotMember,
				"pod's workload (%s) is not a member of GPUReservation %s/%s (members: %s); membership follows the pod's controller, not its labels",
				w, ns, name, memberList(res))
		}
	}
	return nil
}

// admitMember checks that member pod of res can use the reserved GPUs: its
// unallocated claims tolerate the reservation, every device they may get
// has a memoryMiB for a time-sliced one, none above one GPU's budget, and
// the reservation holds GPUs. It returns what Filter and Reserve need.
func (pl *Reservation) admitMember(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, claims []*resourceapi.ResourceClaim, res *rotav1.GPUReservation, member string) (*preFilterState, *fwk.Status) {
	self := gpuv1.ReservedTaintValue(res.Namespace, res.Name)
	s := &preFilterState{res: res, member: member, timeSliced: res.Spec.Mode == rotav1.ReservationTimeSliced}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			continue
		}
		if values, _ := rsv.ClaimTolerations(c); !sets.New(values...).Has(self) {
			pl.metrics.refusals.WithLabelValues(ReasonNotTolerated).Inc()
			return nil, unresolvable(ctx, cs, "", pod, ReasonNotTolerated,
				"pod is member %s of GPUReservation %s/%s but its claim %s does not tolerate %s=%s (NoSchedule), so it cannot use the reserved GPUs; add the toleration to the claim template",
				member, res.Namespace, res.Name, c.Name, gpuv1.ReservedTaintKey, self)
		}
		s.claims = append(s.claims, c)
	}
	demand, missing, err := demandOf(s.claims)
	if err != nil {
		return nil, unresolvable(ctx, cs, "", pod, ReasonNoMemory, "%v", err)
	}
	if s.timeSliced && missing != "" {
		pl.metrics.refusals.WithLabelValues(ReasonNoMemory).Inc()
		return nil, unresolvable(ctx, cs, "", pod, ReasonNoMemory,
			"pod is member %s of time-sliced GPUReservation %s/%s but %s gets no memoryMiB from a GpuConfig (apiVersion %s); a time-sliced reservation admits members by the VRAM budget of every device they get",
			member, res.Namespace, res.Name, missing, gpuv1.APIVersion)
	}
	if len(res.Status.Devices) == 0 || res.Status.Phase == rotav1.ReservationPending || res.Status.Phase == rotav1.ReservationReleasing {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: GPUReservation %s/%s holds no GPUs (phase %q)", ReasonNotHeld, res.Namespace, res.Name, res.Status.Phase))
	}
	if t, ok := tooLarge(demand, res.Status.BudgetMiBPerGPU); ok {
		pl.metrics.refusals.WithLabelValues(ReasonOvercommitted).Inc()
		return nil, unresolvable(ctx, cs, "", pod, ReasonOvercommitted,
			"pod asks %d MiB but GPUReservation %s/%s allows %d MiB per GPU (%s)", t.memoryMiB, res.Namespace, res.Name, res.Status.BudgetMiBPerGPU, t.label)
	}
	if st := pl.checkArgs(ctx, cs, pod, res, member, demand); st != nil {
		return nil, st
	}
	if s.timeSliced {
		s.demand = demand
	}
	return s, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin. Filter reads the
// node's pods itself, so preemption's what-if runs need no extension.
func (pl *Reservation) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// get returns the reservation namespace/name, nil when it does not exist.
func (pl *Reservation) get(namespace, name string) (*rotav1.GPUReservation, error) {
	obj, exists, err := pl.reservations.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, nil //nolint:nilerr // not found: a toleration of nothing is harmless
	}
	return rsv.FromObject(obj)
}

// reservationOf finds the reservation whose member w is, among those the
// member index files under w (and any that did not decode, which fail). When several list
// the workload, the one its claims tolerate wins, then the first by name.
func (pl *Reservation) reservationOf(namespace string, w rsv.Workload, tolerated sets.Set[string]) (*rotav1.GPUReservation, string, error) {
	if w.Kind == "" {
		return nil, "", nil
	}
	objs, err := pl.reservations.ByIndex(reservationsByMemberIndex, memberKey(namespace, w.Kind, w.Name))
	if err != nil {
		return nil, "", fmt.Errorf("GPUReservations of %s listing %s: %w", namespace, w, err)
	}
	undecodable, err := pl.reservations.ByIndex(reservationsByMemberIndex, namespace+"/"+undecodableMember)
	if err != nil {
		return nil, "", fmt.Errorf("GPUReservations of %s: %w", namespace, err)
	}
	objs = append(objs, undecodable...)
	var found []*rotav1.GPUReservation
	for _, o := range objs {
		res, err := rsv.FromObject(o)
		if err != nil {
			return nil, "", err
		}
		if rsv.MemberName(res, w) != "" {
			found = append(found, res)
		}
	}
	if len(found) == 0 {
		return nil, "", nil
	}
	sort.Slice(found, func(i, j int) bool {
		ti := tolerated.Has(gpuv1.ReservedTaintValue(found[i].Namespace, found[i].Name))
		tj := tolerated.Has(gpuv1.ReservedTaintValue(found[j].Namespace, found[j].Name))
		if ti != tj {
			return ti
		}
		return found[i].Name < found[j].Name
	})
	return found[0], rsv.MemberName(found[0], w), nil
}

func memberList(res *rotav1.GPUReservation) string {
	var names []string
	for _, m := range res.Spec.Members {
		names = append(names, m.WorkloadRef.Kind+"/"+m.WorkloadRef.Name)
	}
	return strings.Join(names, ", ")
}

// SignPod refuses opportunistic batching for pods with claims: each member
// changes the budget left for the next.
func (pl *Reservation) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if len(pod.Spec.ResourceClaims) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods with resource claims are not signable")
	}
	return nil, nil
}
