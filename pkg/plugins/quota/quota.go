// Package quota implements Rota's Quota scheduler plugin: per-tenant
// (namespace) limits on devices per model, charged for the model a pod is
// actually granted, not for the most expensive alternative of its claim.
//
// The limit steers the allocator rather than overruling it: DynamicResources
// grants, on each node, the first firstAvailable tier whose devices are
// free there. Quota's Filter works out that tier per node and rejects the
// node when it would take the tenant past a limit, so a tenant at its H100
// limit lands where its claim's A100 tier is what the node grants. A node
// offering both an over-limit and an allowed tier is rejected (the allocator
// cannot be told to skip a free tier); see docs/admission.md.
package quota

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/plugins/refusalmemo"
	"github.com/rota-dev/rota/pkg/waits"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Quota"

var (
	_ fwk.PreFilterPlugin   = &Quota{}
	_ fwk.FilterPlugin      = &Quota{}
	_ fwk.ReservePlugin     = &Quota{}
	_ fwk.PreBindPlugin     = &Quota{}
	_ fwk.PostBindPlugin    = &Quota{}
	_ fwk.EnqueueExtensions = &Quota{}
	_ fwk.SignPlugin        = &Quota{}
)

const preFilterStateKey fwk.StateKey = "PreFilter" + Name

// Quota is the plugin.
type Quota struct {
	dra    fwk.SharedDRAManager
	client kubernetes.Interface
	handle fwk.Handle
	// pods are the scheduler's pods, for waking the waiting ones when the
	// terms change.
	pods corelisters.PodLister
	args *QuotaArgs
	// live holds every tenant's terms (args and GPUQuotas), swapped whole
	// when a GPUQuota changes, and the reclaims under way; shared with the
	// Reclaim plugin. fromArgs are the args' part of the terms.
	live         *gpuquota.Live
	clock        clock.PassiveClock
	fromArgs     []gpuquota.Tenant
	quotasSynced cache.InformerSynced
	// listed is set once a plain LIST loaded the GPUQuotas before the
	// informer synced; rebuildMu orders that load and the informer's.
	listed    atomic.Bool
	rebuildMu sync.Mutex
	// caches are the slice index, compiled selectors and match results,
	// shared with the scheduler's other Rota plugins.
	caches *gpupool.Caches
	// claims are the tenants' claims, found by namespace.
	claims *tenantClaims

	// inFlight holds the charges of claims between Reserve and PostBind,
	// before their allocation is visible in the claim tracker.
	mu       sync.Mutex
	inFlight map[types.UID]charge
	// refused remembers the allocations Reserve refused, per pod and node.
	refused *refusalmemo.Memo
	// models are the models each tier's selectors match, per slice set.
	models *tierModels
}

// charge is what one claim holds: its namespace and devices per model.
type charge struct {
	namespace string
	models    map[string]int64
}

// New builds the plugin from the profile's args, with caches of its own,
// reading GPUQuotas with a client made from the scheduler's kubeconfig.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return Factory(nil, nil, nil)(ctx, obj, h)
}

// Factory returns a constructor whose plugin keeps its slice index,
// compiled selectors and match results in caches, shared with the other
// Rota plugins of the scheduler (nil: caches of its own), shares the terms
// and the reclaims under way with the Reclaim plugin through live (nil: its
// own), and reads GPUQuotas through dyn (nil: a client from the scheduler's
// kubeconfig; without one, only the args' limits apply).
func Factory(caches *gpupool.Caches, live *gpuquota.Live, dyn dynamic.Interface) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, err := decodeArgs(obj)
		if err != nil {
			return nil, err
		}
		dra := h.SharedDRAManager()
		if dra == nil {
			return nil, fmt.Errorf("%s needs the scheduler's shared DRA manager (DynamicResourceAllocation disabled?)", Name)
		}
		if h.SharedInformerFactory() == nil {
			return nil, fmt.Errorf("%s needs the scheduler's shared informer factory", Name)
		}
		claims, err := newTenantClaims(h.SharedInformerFactory().Resource().V1().ResourceClaims().Informer(), dra.ResourceClaims())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		pl := &Quota{dra: dra, client: h.ClientSet(), handle: h, pods: h.SharedInformerFactory().Core().V1().Pods().Lister(), live: gpuquota.LiveOrNew(live), clock: clock.RealClock{}, args: args, fromArgs: argTenants(args), caches: gpupool.CachesOrNew(caches), claims: claims, inFlight: map[types.UID]charge{}, refused: refusalmemo.New(h), models: &tierModels{}}
		table, _ := gpuquota.NewTable(nil, pl.fromArgs)
		pl.live.SetTable(table)
		pl.caches.Limits.Set(table.Limits())
		if dyn == nil && h.KubeConfig() != nil {
			if dyn, err = dynamic.NewForConfig(h.KubeConfig()); err != nil {
				return nil, fmt.Errorf("%s: dynamic client: %w", Name, err)
			}
		}
		switch {
		case dyn == nil:
			klog.FromContext(ctx).Info("Quota has no client for GPUQuotas: only the args' limits apply")
		case !servesGPUQuotas(ctx, h):
			klog.FromContext(ctx).Info("GPUQuotas are not served (their CRD is not installed): only the args' limits apply until the scheduler restarts")
		default:
			if err := pl.watchGPUQuotas(ctx, dyn); err != nil {
				return nil, err
			}
		}
		return pl, nil
	}
}

// Name implements fwk.Plugin.
func (pl *Quota) Name() string { return Name }

// preFilterState is what PreFilter learns; it never changes afterwards, so
// Clone shares it.
type preFilterState struct {
	tenant   *gpuquota.Tenant
	usage    map[string]int64
	inv      *gpupool.Inventory
	requests []gpupool.Request
	matchers [][]*gpupool.Matcher // per request, per tier; nil where the class is missing
}

func (s *preFilterState) Clone() fwk.StateData { return s }

func getState(cs fwk.CycleState) (*preFilterState, error) {
	return cyclestate.Read[*preFilterState](cs, preFilterStateKey)
}

// PreFilter skips pods of unlimited tenants and pods without claims to
// allocate. For the others it reads the tenant's usage and rejects the pod
// at once when no tier of some request can be granted within the limits.
func (pl *Quota) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	tenant := pl.tenantOrDefault(pod.Namespace)
	if tenant == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if pl.quotasSynced != nil && !pl.quotasSynced() && !pl.waitForQuotas(ctx) {
		// An error, not Unschedulable: an unschedulable pod waits for an
		// event Quota registered, and loading the GPUQuotas makes none
		// when there are none; an error is retried after the backoff.
		return nil, fwk.AsStatus(fmt.Errorf("%s: the GPUQuotas are not loaded yet", Name))
	}
	requests, err := gpupool.PodRequests(pl.dra, pod)
	if err != nil || len(requests) == 0 {
		// Missing claims are DynamicResources' to report.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	inv, err := gpupool.CycleInventory(ctx, cs, pl.dra, &pl.caches.Slices)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	pl.mu.Lock()
	use, err := pl.usageLocked(pod.Namespace, inv, nil)
	pl.mu.Unlock()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	s := &preFilterState{tenant: tenant, inv: inv, requests: requests, usage: use}
	for _, r := range requests {
		ms := make([]*gpupool.Matcher, len(r.Tiers))
		for i, t := range r.Tiers {
			if m, err := gpupool.NewMatcher(pl.dra.DeviceClasses(), pl.caches.CEL, pl.caches.Matches, t); err == nil {
				ms[i] = m
			}
		}
		s.matchers = append(s.matchers, ms)
	}
	if msg := s.unreachable(ctx, pl.models, pl.args.ModelAttribute); msg != "" {
		return nil, pl.reject(ctx, cs, "", pod, tenant, msg)
	}
	cs.Write(preFilterStateKey, s)
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *Quota) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// reject refuses the pod on node ("" for every node) with msg, the numbers
// of the limit it would pass; the status reads "QuotaExceeded: <msg>", and
// the refusal is recorded for the WaitReason plugin (cyclestate.Refuse).
func (pl *Quota) reject(ctx context.Context, cs fwk.CycleState, node string, pod *v1.Pod, tenant *gpuquota.Tenant, msg string) *fwk.Status {
	code := fwk.Unschedulable
	if tenant.OverLimit == rotav1.OverLimitRefuse {
		code = fwk.UnschedulableAndUnresolvable
		msg += " (refused by policy)"
	}
	klog.FromContext(ctx).V(3).Info("Quota rejected the pod", "pod", klog.KObj(pod), "node", node, "reason", msg)
	return cyclestate.Refuse(cs, Name, node, code, string(waits.QuotaExceeded)+": ", waits.Refusal{Reason: waits.QuotaExceeded, Message: msg})
}

// usageLocked counts the devices per model the namespace holds: allocated
// claims in the tracker and claims reserved in this scheduler but not
// bound yet, except the claims in skip. Only the namespace's claims are
// read (tenantClaims). pl.mu must be held.
func (pl *Quota) usageLocked(namespace string, inv *gpupool.Inventory, skip sets.Set[types.UID]) (map[string]int64, error) {
	use := map[string]int64{}
	counted := sets.New[types.UID]()
	for uid, c := range pl.inFlight {
		if c.namespace != namespace || skip.Has(uid) {
			continue
		}
		counted.Insert(uid)
		for m, n := range c.models {
			use[m] += n
		}
	}
	claims, err := pl.claims.list(namespace)
	if err != nil {
		return nil, fmt.Errorf("usage of tenant %s: %w", namespace, err)
	}
	for _, c := range claims {
		if c.Status.Allocation == nil || counted.Has(c.UID) || skip.Has(c.UID) {
			continue
		}
		for m, n := range pl.chargeOf(c.Status.Allocation, inv) {
			use[m] += n
		}
	}
	return use, nil
}

// fingerprint is the state an allocation on node depends on: the tenant's
// usage and which devices of the node are allocated and how often.
func (s *preFilterState) fingerprint(node string) string {
	var b strings.Builder
	for _, m := range sortedModels(s.usage) {
		fmt.Fprintf(&b, "%s=%d;", m, s.usage[m])
	}
	for _, nd := range s.inv.ByNode[node] {
		if d := s.inv.DeviceOf(node, nd); d.Allocated || len(d.Consumed) > 0 {
			fmt.Fprintf(&b, "%s:%v:%v;", d.ID, d.Allocated, d.Consumed)
		}
	}
	return b.String()
}

// chargeOf counts an allocation's devices per model.
func (pl *Quota) chargeOf(alloc *resourceapi.AllocationResult, inv *gpupool.Inventory) map[string]int64 {
	out := map[string]int64{}
	for _, r := range alloc.Devices.Results {
		d, ok := inv.ByID[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]
		if !ok {
			continue
		}
		if m := gpupool.StringAttribute(d, r.Driver, resourceapi.QualifiedName(pl.args.ModelAttribute)); m != "" {
			out[m]++
		}
	}
	return out
}

// remaining is how many more devices of model the tenant may take; -1 when
// the model is unlimited.
func (s *preFilterState) remaining(model string) int64 {
	limit, ok := limitOf(s.tenant, model)
	if !ok {
		return -1
	}
	return max(limit-s.usage[model], 0)
}

// limitOf is the most devices of model the tenant may hold; false when it
// may hold any number.
func limitOf(t *gpuquota.Tenant, model string) (int64, bool) {
	terms, ok := t.Models[model]
	if !ok {
		return 0, false
	}
	limit, ok := terms.Limit()
	return int64(limit), ok
}

// unreachable returns a message when some request has no tier that any
// device of the pool could grant within the limits. Which models a tier
// matches is looked up in models, not counted device by device.
func (s *preFilterState) unreachable(ctx context.Context, models *tierModels, attr string) string {
	for ri, r := range s.requests {
		var blocked []string
		ok := false
		for ti := range r.Tiers {
			m := s.matchers[ri][ti]
			if m == nil {
				ok = true // DynamicResources reports the missing class
				break
			}
			models := models.of(ctx, s.inv, m, attr)
			if len(models) == 0 {
				ok = true // nothing to charge; capacity is someone else's answer
				break
			}
			for model := range models {
				if rem := s.remaining(model); rem < 0 || rem >= r.Tiers[ti].Count {
					ok = true
				}
			}
			if ok {
				break
			}
			blocked = append(blocked, s.overMessage(waits.TierLabel(r, ti), sortedModels(models), r.Tiers[ti].Count))
		}
		if !ok {
			return strings.Join(blocked, "; ")
		}
	}
	return ""
}

func sortedModels(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// overMessage says, with numbers, why tier label cannot be granted.
func (s *preFilterState) overMessage(label string, models []string, need int64) string {
	parts := make([]string, 0, len(models))
	for _, m := range models {
		if limit, ok := limitOf(s.tenant, m); ok {
			parts = append(parts, fmt.Sprintf("%s holds %d of %d %s", s.tenant.Namespace, s.usage[m], limit, m))
		}
	}
	return fmt.Sprintf("%s needs %d more: %s", label, need, strings.Join(parts, ", "))
}

// Filter works out which tier DynamicResources would grant on the node and
// rejects the node if that would take the tenant past a limit.
func (pl *Quota) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return nil // PreFilter skipped the pod
	}
	node := ni.Node().Name
	if msg, ok := pl.refused.Get(pod.UID, node, s.fingerprint(node)); ok {
		return pl.reject(ctx, cs, node, pod, s.tenant, msg)
	}
	grant, labels := s.wouldGrant(ctx, node, pl.args.ModelAttribute)
	var over []string
	for _, model := range sortedModels(grant) {
		if rem := s.remaining(model); rem >= 0 && grant[model] > rem {
			over = append(over, s.overMessage(strings.Join(labels, ", "), []string{model}, grant[model]))
		}
	}
	if len(over) == 0 {
		return nil
	}
	return pl.reject(ctx, cs, node, pod, s.tenant, fmt.Sprintf("on node %s the claim would be granted %s", node, strings.Join(over, "; ")))
}

// wouldGrant mimics the allocator on one node for the common case of
// whole devices: per request, the first tier with enough free, untainted
// matching devices, taking them in slice order. It returns the devices per
// model and the tiers chosen.
func (s *preFilterState) wouldGrant(ctx context.Context, node, attr string) (map[string]int64, []string) {
	grant := map[string]int64{}
	var labels []string
	taken := sets.New[structured.DeviceID]()
	for ri, r := range s.requests {
		for ti, t := range r.Tiers {
			m := s.matchers[ri][ti]
			if m == nil {
				continue
			}
			var pick []*gpupool.Device
			for _, nd := range s.inv.ByNode[node] {
				d := new(s.inv.DeviceOf(node, nd))
				if taken.Has(d.ID) || !d.FreeFor(t) || gpupool.BlockingTaint(d.Device, t.Tolerations) != nil || !m.Matches(ctx, d) {
					continue
				}
				pick = append(pick, d)
				if !t.All && int64(len(pick)) == t.Count {
					break
				}
			}
			if len(pick) == 0 || (!t.All && int64(len(pick)) < t.Count) {
				continue
			}
			for _, d := range pick {
				taken.Insert(d.ID)
				if model := gpupool.StringAttribute(d.Device, d.ID.Driver.String(), resourceapi.QualifiedName(attr)); model != "" {
					grant[model]++
				}
			}
			labels = append(labels, waits.TierLabel(r, ti))
			break
		}
	}
	return grant, labels
}

// SignPod refuses batching for pods of limited tenants: their verdict
// depends on usage that each placement changes.
func (pl *Quota) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if t := pl.tenantOrDefault(pod.Namespace); t != nil && len(pod.Spec.ResourceClaims) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods of tenants with GPU limits are not signable")
	}
	return nil, nil
}
