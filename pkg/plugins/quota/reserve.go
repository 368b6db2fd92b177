package quota

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/gpuquota"
)

// Reserve checks the devices DynamicResources actually allocated (its
// pending allocation; it runs first) against the tenant's limits and, when
// they fit, charges them, so that pods scheduled while this one binds see
// the usage. Filter only predicts the tier the allocator grants (it does
// not evaluate the claim's constraints), so this is where a limit holds: an
// allocation that takes the tenant past a limit is refused before the pod
// binds, and remembered, so that the next attempt is refused on that node
// in Filter while the node and the tenant's usage stay the same.
func (pl *Quota) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return nil
	}
	mine := map[types.UID]charge{}
	granted := map[string]int64{}
	for _, r := range s.requests {
		claim := r.Claim
		if _, done := mine[claim.UID]; done {
			continue
		}
		alloc := pl.dra.ResourceClaims().GetPendingAllocation(claim.UID)
		if alloc == nil {
			continue
		}
		c := charge{namespace: pod.Namespace, models: pl.chargeOf(alloc, s.inv)}
		mine[claim.UID] = c
		for m, n := range c.models {
			granted[m] += n
		}
	}
	skip := sets.KeySet(mine)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	use, err := pl.usageLocked(pod.Namespace, s.inv, skip)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if over := overLimits(s.tenant, use, granted); len(over) > 0 {
		msg := fmt.Sprintf("on node %s the allocator granted %s; %s", node, describeGrant(granted), strings.Join(over, ", "))
		pl.refused.Add(ctx, pod, node, s.fingerprint(node), msg)
		return pl.reject(ctx, cs, node, pod, s.tenant, msg)
	}
	borrowed := borrowedOf(pl.live.Table(), pod.Namespace, use, granted)
	if len(borrowed) > 0 {
		for _, m := range sortedModels(borrowed) {
			if unit, ok := pl.live.Reclaiming(m, pl.clock.Now()); ok {
				msg := fmt.Sprintf("on node %s the allocator granted %s; %s would borrow %d %s while %s reclaims %s for its guarantee", node, describeGrant(granted), pod.Namespace, borrowed[m], m, unit, m)
				return pl.reject(ctx, cs, node, pod, s.tenant, msg)
			}
		}
		msg, err := pl.lendingRefusal(pod.Namespace, s.inv, borrowed, granted)
		if err != nil {
			return fwk.AsStatus(err)
		}
		if msg != "" {
			msg = fmt.Sprintf("on node %s the allocator granted %s; %s", node, describeGrant(granted), msg)
			pl.refused.Add(ctx, pod, node, s.fingerprint(node), msg)
			return pl.reject(ctx, cs, node, pod, s.tenant, msg)
		}
	}
	cs.Write(borrowStateKey, &borrowState{models: borrowed})
	for uid, c := range mine {
		pl.inFlight[uid] = c
	}
	klog.FromContext(ctx).V(4).Info("Quota charged", "pod", klog.KObj(pod), "node", node, "granted", granted)
	return nil
}

// overLimits lists, for each limited model of granted that would take the
// tenant past its limit, what it holds, the limit and the grant.
func overLimits(t *gpuquota.Tenant, use, granted map[string]int64) []string {
	var over []string
	for _, m := range sortedModels(granted) {
		limit, ok := limitOf(t, m)
		if ok && use[m]+granted[m] > limit {
			over = append(over, fmt.Sprintf("%s holds %d of %d %s and this pod would take %d more: %d > %d", t.Namespace, use[m], limit, m, granted[m], use[m]+granted[m], limit))
		}
	}
	return over
}

func describeGrant(granted map[string]int64) string {
	parts := make([]string, 0, len(granted))
	for _, m := range sortedModels(granted) {
		parts = append(parts, fmt.Sprintf("%d %s", granted[m], m))
	}
	return strings.Join(parts, ", ")
}

// Unreserve drops the charges Reserve made.
func (pl *Quota) Unreserve(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ string) {
	pl.release(cs)
}

// PostBind drops the in-flight charges: the claims' allocations are in the
// tracker now and count from there.
func (pl *Quota) PostBind(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ string) {
	pl.refused.Forget(pod.UID)
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
