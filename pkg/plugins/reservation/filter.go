package reservation

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

var labelsEverything = labels.Everything()

// usage is the VRAM a reservation's members hold or are about to hold.
type usage struct {
	memoryMiB int64
	pods      int
}

// Filter keeps a member on its reservation's node and, for a time-sliced
// reservation, admits it only while Σ memoryMiB of the members on the node
// (bound and assumed, as the scheduler cache has them), of the members
// between Reserve and binding, and of this pod stays within the budget:
// BudgetMiBPerGPU × the number of GPUs held.
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
	used, err := pl.used(s.res, pod, nodeInfo)
	if err != nil {
		return fwk.AsStatus(err)
	}
	budget := s.res.Status.BudgetMiBPerGPU * int64(len(s.res.Status.Devices))
	if used.memoryMiB+s.memoryMiB > budget {
		pl.metrics.refusals.WithLabelValues(ReasonOvercommitted).Inc()
		return unresolvable(ctx, pod, ReasonOvercommitted,
			"GPUReservation %s/%s budget is %d MiB (%d GPU(s) × %d MiB); members hold %d MiB in %d pod(s) and this pod (member %s) asks %d MiB: %d > %d",
			s.res.Namespace, s.res.Name, budget, len(s.res.Status.Devices), s.res.Status.BudgetMiBPerGPU,
			used.memoryMiB, used.pods, s.member, s.memoryMiB, used.memoryMiB+s.memoryMiB, budget)
	}
	return nil
}

// used sums the memoryMiB of res's members other than pod: those the
// scheduler cache has on the node (bound or assumed) and those in the
// ledger that the cache does not show yet.
func (pl *Reservation) used(res *rotav1.GPUReservation, pod *v1.Pod, nodeInfo fwk.NodeInfo) (usage, error) {
	var u usage
	seen := sets.New[types.UID](pod.UID)
	for _, pi := range nodeInfo.GetPods() {
		p := pi.GetPod()
		if p.Namespace != res.Namespace || p.UID == pod.UID || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		w, err := rsv.WorkloadOf(p, pl.replicaSets)
		if err != nil {
			return usage{}, err
		}
		if rsv.MemberName(res, w) == "" {
			continue
		}
		mem, _, err := memoryOf(pl.podClaims(p))
		if err != nil {
			return usage{}, err
		}
		seen.Insert(p.UID)
		u.memoryMiB += mem
		u.pods++
	}
	mem, n := pl.inFlight.others(res.Namespace+"/"+res.Name, seen)
	u.memoryMiB += mem
	u.pods += n
	return u, nil
}

// Reserve records the member's VRAM until the binding is done, so that the
// next pod's Filter counts it even where the cache does not show it.
func (pl *Reservation) Reserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	s, err := getPreFilterState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s == nil || !s.timeSliced {
		return nil
	}
	pl.inFlight.add(pod.UID, ledgerEntry{reservation: s.res.Namespace + "/" + s.res.Name, memoryMiB: s.memoryMiB})
	return nil
}

// Unreserve forgets the member's VRAM when scheduling or binding failed.
func (pl *Reservation) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.inFlight.remove(pod.UID)
}

// PostBind hands the accounting over to the scheduler cache, which shows
// the bound pod on its node from now on.
func (pl *Reservation) PostBind(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ string) {
	pl.inFlight.remove(pod.UID)
	if s, _ := getPreFilterState(cs); s != nil {
		pl.metrics.admitted.WithLabelValues(s.res.Namespace).Inc()
	}
}
