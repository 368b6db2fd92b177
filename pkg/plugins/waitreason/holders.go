package waitreason

import (
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// claimHolders answers waits.HolderIndex for one classification: the pods
// the claims holding a device are reserved for. gpupool.ClaimsByDeviceIndex
// on the claim informer finds the claims
// by their written allocation; the claim tracker gives each as the
// scheduler sees it now. A claim whose allocation is not written yet (in
// flight in this scheduler) has no holder to name: its pod is still being
// bound. A device shared by several claims is held by all their pods.
type claimHolders struct {
	idx    cache.Indexer
	claims fwk.ResourceClaimTracker
	// byClaim remembers each claim's pods: a claim holding eight GPUs is
	// read once.
	byClaim map[string][]types.NamespacedName
}

func newClaimHolders(idx cache.Indexer, claims fwk.ResourceClaimTracker) *claimHolders {
	return &claimHolders{idx: idx, claims: claims, byClaim: map[string][]types.NamespacedName{}}
}

// HoldersOf implements waits.HolderIndex.
func (h *claimHolders) HoldersOf(id structured.DeviceID) []types.NamespacedName {
	keys, err := h.idx.IndexKeys(gpupool.ClaimsByDeviceIndex, gpupool.DeviceKey(id))
	if err != nil {
		return nil
	}
	var out []types.NamespacedName
	for _, key := range keys {
		pods, seen := h.byClaim[key]
		if !seen {
			pods = h.podsOf(key)
			h.byClaim[key] = pods
		}
		out = append(out, pods...)
	}
	return out
}

func (h *claimHolders) podsOf(key string) []types.NamespacedName {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	c, err := h.claims.Get(ns, name)
	if err != nil || c.Status.Allocation == nil {
		return nil
	}
	var pods []types.NamespacedName
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" {
			pods = append(pods, types.NamespacedName{Namespace: c.Namespace, Name: r.Name})
		}
	}
	return pods
}

// holderInfo answers the classifier's questions about holders from the
// scheduler's informers, each pod's answer read once per classification.
type holderInfo struct {
	pods     corelisters.PodLister
	pdbs     policylisters.PodDisruptionBudgetLister
	priority map[types.NamespacedName]priorityAnswer
	pinned   map[types.NamespacedName]bool
}

type priorityAnswer struct {
	priority int32
	ok       bool
}

func newHolderInfo(pods corelisters.PodLister, pdbs policylisters.PodDisruptionBudgetLister) *holderInfo {
	return &holderInfo{pods: pods, pdbs: pdbs, priority: map[types.NamespacedName]priorityAnswer{}, pinned: map[types.NamespacedName]bool{}}
}

// Priority implements waits.Holders.
func (h *holderInfo) Priority(key types.NamespacedName) (int32, bool) {
	if a, ok := h.priority[key]; ok {
		return a.priority, a.ok
	}
	var a priorityAnswer
	if p, err := h.pods.Pods(key.Namespace).Get(key.Name); err == nil {
		a = priorityAnswer{priority: podPriority(p), ok: true}
	}
	h.priority[key] = a
	return a.priority, a.ok
}

// Pinned implements waits.Holders: whether a PodDisruptionBudget selecting
// the pod allows no disruption: minAvailable (a number) at or above the
// running pods it selects, or maxUnavailable 0. It reads the budget's
// spec, so it does not depend on the disruption controller having updated
// its status.
func (h *holderInfo) Pinned(key types.NamespacedName) bool {
	if p, ok := h.pinned[key]; ok {
		return p
	}
	p := h.pinnedNow(key)
	h.pinned[key] = p
	return p
}

func (h *holderInfo) pinnedNow(key types.NamespacedName) bool {
	pod, err := h.pods.Pods(key.Namespace).Get(key.Name)
	if err != nil {
		return false
	}
	budgets, err := h.pdbs.PodDisruptionBudgets(key.Namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	for _, b := range budgets {
		if pinnedBy(b, pod, h.pods) {
			return true
		}
	}
	return false
}

func pinnedBy(b *policyv1.PodDisruptionBudget, pod *v1.Pod, pods corelisters.PodLister) bool {
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		return false
	}
	if mu := b.Spec.MaxUnavailable; mu != nil && mu.Type == intstr.Int && mu.IntVal == 0 {
		return true
	}
	ma := b.Spec.MinAvailable
	if ma == nil || ma.Type != intstr.Int {
		return false
	}
	selected, err := pods.Pods(pod.Namespace).List(sel)
	if err != nil {
		return false
	}
	running := 0
	for _, p := range selected {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			running++
		}
	}
	return running <= int(ma.IntVal)
}
