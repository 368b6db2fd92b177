package reservation

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
)

// EventsToRegister names the changes that can admit a refused member: a pod
// of its namespace leaving a node (VRAM budget freed), a claim changing
// (a member's claim gets its toleration or config), a slice changing (the
// reservation's taints are applied or a GPU heals).
func (pl *Reservation) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: isSchedulableAfterPodDeleted},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update}},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}},
	}, nil
}

// isSchedulableAfterPodDeleted queues the pod when a pod of its own
// namespace went away: only members of the same reservation free budget.
func isSchedulableAfterPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	deleted, _, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterPodDeleted: %w", err)
	}
	if deleted == nil || deleted.Namespace != pod.Namespace || len(deleted.Spec.ResourceClaims) == 0 {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Pod with claims left the namespace's nodes", "pod", klog.KObj(pod), "deleted", klog.KObj(deleted))
	return fwk.Queue, nil
}
