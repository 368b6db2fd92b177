package quota

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Reserve charges the tenant for the devices DynamicResources actually
// allocated (its pending allocation), so that pods scheduled while this one
// binds see the usage. It runs after DynamicResources' Reserve.
func (pl *Quota) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, r := range s.requests {
		claim := r.Claim
		if _, done := pl.inFlight[claim.UID]; done {
			continue
		}
		alloc := pl.dra.ResourceClaims().GetPendingAllocation(claim.UID)
		if alloc == nil {
			continue
		}
		pl.inFlight[claim.UID] = charge{namespace: pod.Namespace, models: pl.chargeOf(alloc, s.pool)}
	}
	klog.FromContext(ctx).V(4).Info("Quota charged", "pod", klog.KObj(pod), "node", node)
	return nil
}

// Unreserve drops the charges Reserve made.
func (pl *Quota) Unreserve(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ string) {
	pl.release(cs)
}

// PostBind drops the in-flight charges: the claims' allocations are in the
// tracker now and count from there.
func (pl *Quota) PostBind(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ string) {
	pl.release(cs)
}

func (pl *Quota) release(cs fwk.CycleState) {
	s, err := getState(cs)
	if err != nil {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, r := range s.requests {
		delete(pl.inFlight, r.Claim.UID)
	}
}
