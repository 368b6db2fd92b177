// Package tiering implements Rota's Tiering scheduler plugin: strict
// best-tier placement for ResourceClaims whose requests list alternatives
// with firstAvailable, deterministic tie-breaks, and explained decisions.
//
// Tiering never allocates devices itself. The in-tree DynamicResources plugin
// filters nodes and allocates; Tiering runs the same structured allocator on
// the same shared DRA state to learn which tier each feasible node would get,
// ranks the nodes, re-checks device health before binding, binds the pods it
// placed with their tier on the Binding, and explains the outcome on the pod.
// Its Filter, first in the profile, keeps nodes that can only give a lower
// tier than a node known to pass every filter from the other Filter plugins
// (prune.go).
package tiering

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/waits"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Tiering"

var (
	_ fwk.PreFilterPlugin   = &Tiering{}
	_ fwk.FilterPlugin      = &Tiering{}
	_ fwk.PreScorePlugin    = &Tiering{}
	_ fwk.ScorePlugin       = &Tiering{}
	_ fwk.PostFilterPlugin  = &Tiering{}
	_ fwk.ReservePlugin     = &Tiering{}
	_ fwk.PreBindPlugin     = &Tiering{}
	_ fwk.BindPlugin        = &Tiering{}
	_ fwk.PostBindPlugin    = &Tiering{}
	_ fwk.EnqueueExtensions = &Tiering{}
	_ fwk.SignPlugin        = &Tiering{}
)

const (
	preFilterStateKey fwk.StateKey = "PreFilter" + Name
	preScoreStateKey  fwk.StateKey = "PreScore" + Name
	reserveStateKey   fwk.StateKey = "Reserve" + Name
)

// Tiering is the plugin. It holds no per-pod state: everything a scheduling
// cycle learns lives in that cycle's CycleState.
type Tiering struct {
	handle   fwk.Handle
	args     *TieringArgs
	dra      fwk.SharedDRAManager
	features structured.Features
	metrics  *pluginMetrics
	// nodes tell a node removed since the cycle began (NodeLost).
	nodes corelisters.NodeLister
	// caches are the slice index, compiled selectors and match results,
	// shared with the scheduler's other Rota plugins.
	caches *gpupool.Caches
	// pools reads the granted devices' pools for the health recheck.
	pools *poolDevices
	// candidates and static are what PostFilter's explanation reuses from
	// one cycle to the next while the slices stay the same: the devices
	// each tier's selectors accept, and the verdicts on the nodes with none.
	candidates *waits.CandidateCache
	static     *staticVerdicts
}

// New builds the plugin from the profile's args, with caches of its own.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return Factory(nil)(ctx, obj, h)
}

// Factory returns a constructor whose plugin keeps its slice index,
// compiled selectors and match results in caches, shared with the other
// Rota plugins of the scheduler; nil gives the plugin caches of its own.
// Shared caches must compile with CELFeatures.
func Factory(caches *gpupool.Caches) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, err := decodeArgs(obj)
		if err != nil {
			return nil, err
		}
		dra := h.SharedDRAManager()
		if dra == nil {
			return nil, fmt.Errorf("%s needs the scheduler's shared DRA manager (DynamicResourceAllocation disabled?)", Name)
		}
		if !utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
			return nil, fmt.Errorf("%s needs the DynamicResourceAllocation feature", Name)
		}
		shared := caches
		if shared == nil {
			shared = gpupool.NewCaches(CELFeatures())
		}
		pools, err := newRecheckIndex(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		klog.FromContext(ctx).V(2).Info("Tiering plugin configured", "policyVersion", args.PolicyVersion)
		return &Tiering{
			pools:      pools,
			candidates: &waits.CandidateCache{},
			static:     &staticVerdicts{},
			handle:     h,
			args:       args,
			dra:        dra,
			features:   dynamicresources.AllocatorFeatures(schedulerFeatures()),
			caches:     shared,
			metrics:    registerMetrics(),
			nodes:      h.SharedInformerFactory().Core().V1().Nodes().Lister(),
		}, nil
	}
}

// newRecheckIndex indexes the scheduler's ResourceSlice informer and, when
// the scheduler applies DeviceTaintRules (the DRADeviceTaintRules gate, as
// for its slice tracker), its DeviceTaintRule informer, which the scheduler
// then has as well.
func newRecheckIndex(h fwk.Handle) (*poolDevices, error) {
	f := h.SharedInformerFactory()
	var rules cache.SharedIndexInformer
	if utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules) {
		rules = f.Resource().V1().DeviceTaintRules().Informer()
	}
	return newPoolDevices(f.Resource().V1().ResourceSlices().Informer(), rules)
}

// schedulerFeatures are the features the scheduler derives for
// DynamicResources from the process's gates. Tiering must predict exactly
// what DynamicResources will allocate, so its allocator uses the same.
func schedulerFeatures() plfeature.Features {
	return plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
}

// CELFeatures are the CEL features of the scheduler's allocator under the
// process's feature gates: the caches Tiering shares must compile with them.
func CELFeatures() cel.Features {
	fts := schedulerFeatures()
	return cel.Features{
		EnableConsumableCapacity: fts.EnableDRAConsumableCapacity,
		EnableListTypeAttributes: fts.EnableDRAListTypeAttributes,
	}
}

// Name implements fwk.Plugin.
func (pl *Tiering) Name() string { return Name }

// preFilterState is what PreFilter learns about the pod: the claims that
// still need an allocation and their tiered (firstAvailable) requests;
// index in a request's Tiers is the tier rank (0 = most preferred). It never changes
// after PreFilter, so Clone may share it.
type preFilterState struct {
	claims   []*resourceapi.ResourceClaim
	requests []gpupool.Request
	// simple is true when the claims have the shape the fast path ranks
	// by counting devices (see fastpath.go).
	simple bool
	// prune ranks the nodes for tier-aware pruning (prune.go); nil when
	// the pod is not pruned.
	prune *pruneState
}

func (s *preFilterState) Clone() fwk.StateData { return s }

func getPreFilterState(cs fwk.CycleState) (*preFilterState, error) {
	return cyclestate.Read[*preFilterState](cs, preFilterStateKey)
}

// PreFilter collects the pod's unallocated claims with firstAvailable
// requests. Pods without such claims are not Tiering's business: Skip.
// Missing claims are left to DynamicResources, which rejects the pod. For
// a pod it may prune, it ranks the nodes by counting (prune.go).
func (pl *Tiering) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s := &preFilterState{}
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		claim, err := pl.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		if claim.Status.Allocation != nil {
			continue
		}
		s.claims = append(s.claims, claim)
		s.requests = append(s.requests, gpupool.TieredRequests(claim)...)
	}
	if len(s.requests) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s.simple = simpleClaimShape(s.claims)
	logger := klog.FromContext(ctx)
	logger.V(5).Info("Tiered claims", "pod", klog.KObj(pod), "claims", klog.KObjSlice(s.claims))
	if s.simple && !pl.args.DisablePruning {
		// Pruning only saves work: when the devices cannot be read or
		// ranked, every node is filtered, and PreScore reports the error.
		if err := pl.preparePruning(ctx, cs, s, pod, nodes); err != nil {
			logger.V(3).Info("Not pruning", "pod", klog.KObj(pod), "err", err)
		}
	}
	cs.Write(preFilterStateKey, s)
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin; the state does not
// depend on other pods.
func (pl *Tiering) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// SignPod refuses opportunistic batching for pods with claims: two pods
// with the same template still compete for individual devices, so one
// pod's result says nothing about the next. Pods without claims sign freely.
func (pl *Tiering) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if len(pod.Spec.ResourceClaims) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pods with tiered resource claims are not signable")
	}
	return nil, nil
}
