package reservation

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// usage is the VRAM charged to each held GPU and by how many claims.
type usage struct {
	memoryMiB rsv.Charges
	claims    map[rsv.HeldGPU]int
}

// Filter keeps a member on its reservation's node and, for a time-sliced
// reservation, admits it only while each of its devices can get a held GPU
// whose budget (BudgetMiBPerGPU) still has room for it, given the claims
// already allocated there, those allocated in this scheduler and not
// written yet, and the pod's own other devices.
func (pl *Reservation) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getPreFilterState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s == nil {
		return nil
	}
	node := nodeInfo.Node()
	if node == nil || node.Name != s.res.Spec.NodeName {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("member %s of GPUReservation %s/%s runs only on node %s", s.member, s.res.Namespace, s.res.Name, s.res.Spec.NodeName))
	}
	if !s.timeSliced {
		return nil
	}
	u := pl.usage(ctx, s.res, s.claimUIDs())
	if msg, ok := pl.refused.Get(pod.UID, s.res.Namespace+"/"+s.res.Name, u.memoryMiB.String()); ok {
		pl.metrics.refusals.WithLabelValues(ReasonOvercommitted).Inc()
		return unresolvable(ctx, cs, node.Name, pod, ReasonOvercommitted, "%s", msg)
	}
	budget := s.res.Status.BudgetMiBPerGPU
	free := map[rsv.HeldGPU]int64{}
	for g, n := range u.memoryMiB {
		free[g] = budget - n
	}
	r, ok := fit(free, s.demand)
	if ok {
		return nil
	}
	pl.metrics.refusals.WithLabelValues(ReasonOvercommitted).Inc()
	g := roomiest(free)
	t := r.tiers[0]
	if len(r.tiers) == 1 && t.count == 1 && !t.all {
		return unresolvable(ctx, cs, node.Name, pod, ReasonOvercommitted,
			"GPUReservation %s/%s budget is %d MiB per GPU (%d GPU(s) held); on %s, the held GPU with the most room, claims hold %d MiB in %d claim(s) and this pod (member %s) asks %d MiB: %d > %d",
			s.res.Namespace, s.res.Name, budget, len(free), g, u.memoryMiB[g], u.claims[g], s.member, t.memoryMiB, u.memoryMiB[g]+t.memoryMiB, budget)
	}
	return unresolvable(ctx, cs, node.Name, pod, ReasonOvercommitted,
		"GPUReservation %s/%s budget is %d MiB per GPU (%d GPU(s) held); claims hold %s, and this pod (member %s) asks %s for %s, which no choice of held GPUs fits",
		s.res.Namespace, s.res.Name, budget, len(free), u.memoryMiB, s.member, r.describe(), r.label)
}

// roomiest is the held GPU with the most budget left, by name on ties.
func roomiest(free map[rsv.HeldGPU]int64) rsv.HeldGPU {
	rooms := make([]gpuRoom, 0, len(free))
	for g, n := range free {
		rooms = append(rooms, gpuRoom{g, n})
	}
	sortRooms(rooms)
	if len(rooms) == 0 {
		return rsv.HeldGPU{}
	}
	return rooms[0].gpu
}

// claimUIDs are the UIDs of the pod's claims that this cycle allocates.
func (s *preFilterState) claimUIDs() sets.Set[types.UID] {
	out := sets.New[types.UID]()
	for _, c := range s.claims {
		out.Insert(c.UID)
	}
	return out
}

// usage sums what every claim allocated on res's held GPUs costs each of
// them: allocations the claim tracker has (written, or assumed after the
// API call) and allocations made in this scheduler's Reserve and not
// written yet (pending), skipping the claims in skip. Every claim counts,
// member or not, for the budget is memory on the GPU. The claims read are
// those the claim index places near res (claimsNear), not every claim.
func (pl *Reservation) usage(ctx context.Context, res *rotav1.GPUReservation, skip sets.Set[types.UID]) usage {
	held := rsv.HeldGPUs(res)
	u := usage{memoryMiB: rsv.Charges{}, claims: map[rsv.HeldGPU]int{}}
	for g := range held {
		u.memoryMiB[g] = 0
	}
	keys, err := claimsNear(pl.claimIndex, res, held)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing claims for the VRAM budget")
	}
	seen := sets.New(keys...)
	for _, key := range pl.inflight.list() {
		if !seen.Has(key) {
			keys = append(keys, key)
		}
	}
	for _, key := range keys {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			continue
		}
		c, err := pl.claims.Get(ns, name)
		if err != nil {
			continue // gone since the informer saw it
		}
		if skip.Has(c.UID) {
			continue
		}
		alloc := c.Status.Allocation
		if alloc == nil {
			alloc = pl.claims.GetPendingAllocation(c.UID)
		}
		if alloc == nil {
			continue
		}
		charges, err := rsv.AllocationCharges(c, alloc, held)
		if err != nil {
			klog.FromContext(ctx).V(3).Info("Claim config does not decode; its devices are charged without memoryMiB", "resourceclaim", klog.KObj(c), "err", err)
		}
		for g, n := range charges {
			u.memoryMiB[g] += n
			u.claims[g]++
		}
	}
	return u
}

// Reserve checks the devices DynamicResources' Reserve (which runs first)
// actually chose for the member against each GPU's budget: Filter could
// only know that some choice fits. A refusal is remembered, so that while
// the GPUs' usage stays the same the next attempt is refused in Filter.
func (pl *Reservation) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := getPreFilterState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	pl.trackPending(pod)
	if s == nil || !s.timeSliced {
		return nil
	}
	held := rsv.HeldGPUs(s.res)
	mine := rsv.Charges{}
	for _, c := range s.claims {
		alloc := pl.claims.GetPendingAllocation(c.UID)
		if alloc == nil {
			continue
		}
		charges, err := rsv.AllocationCharges(c, alloc, held)
		if err != nil {
			return fwk.AsStatus(err)
		}
		mine.Add(charges)
	}
	u := pl.usage(ctx, s.res, s.claimUIDs())
	budget := s.res.Status.BudgetMiBPerGPU
	for _, g := range mine.GPUs() {
		if total := u.memoryMiB[g] + mine[g]; total > budget {
			msg := fmt.Sprintf("GPUReservation %s/%s budget is %d MiB per GPU; the allocator chose %s for this pod (member %s), where claims hold %d MiB in %d claim(s) and this pod asks %d MiB: %d > %d. "+
				"The allocator picks a GPU by its free memory, not by the budget: pin the member's claim to a held GPU with room (a selector on its uuid) or wait for members to leave",
				s.res.Namespace, s.res.Name, budget, g, s.member, u.memoryMiB[g], u.claims[g], mine[g], total, budget)
			pl.refused.Add(ctx, pod, s.res.Namespace+"/"+s.res.Name, u.memoryMiB.String(), msg)
			pl.metrics.refusals.WithLabelValues(ReasonOvercommitted).Inc()
			return unresolvable(ctx, cs, nodeName, pod, ReasonOvercommitted, "%s", msg)
		}
	}
	return nil
}

// trackPending records pod's claims that DynamicResources' Reserve (which
// runs first) allocated, for the budget of every reservation whose GPU they
// got until the informer shows them allocated (inflightClaims).
func (pl *Reservation) trackPending(pod *v1.Pod) {
	for _, c := range pl.podClaims(pod) {
		if pl.claims.GetPendingAllocation(c.UID) != nil {
			pl.inflight.add(c.UID, c.Namespace+"/"+c.Name)
		}
	}
}

// Unreserve forgets the pod's in-flight claims; the pending allocations
// Reserve read are DynamicResources' to drop.
func (pl *Reservation) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	for _, c := range pl.podClaims(pod) {
		pl.inflight.remove(c.UID)
	}
}

// PostBind counts the admitted member and forgets any earlier refusal.
func (pl *Reservation) PostBind(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ string) {
	pl.refused.Forget(pod.UID)
	if s, _ := getPreFilterState(cs); s != nil {
		pl.metrics.admitted.WithLabelValues(s.res.Namespace).Inc()
	}
}
