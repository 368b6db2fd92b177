package reservation

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
)

// Owner workloads a pod's controller chain passes through, as the
// scheduler names resources for events it watches with dynamic informers
// (<plural>.<version>.<group>).
var ownerEventResources = []fwk.EventResource{"replicasets.v1.apps", "deployments.v1.apps", "statefulsets.v1.apps", "jobs.v1.batch"}

// lwsEventResource is LeaderWorkerSets', registered only where the API is
// served.
const lwsEventResource fwk.EventResource = "leaderworkersets.v1.leaderworkerset.x-k8s.io"

// EventsToRegister names the changes that can admit a refused member: a pod
// of its namespace leaving a node (VRAM budget freed), a claim changing
// (a member's claim gets its toleration or config), a slice changing (the
// reservation's taints are applied or a GPU heals), and a workload of its
// namespace appearing or changing (its controller chain may verify now:
// the pod can be tried before this scheduler's informer has its owner).
func (pl *Reservation) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: isSchedulableAfterPodDeleted},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update}},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}},
	}
	resources := ownerEventResources
	if pl.owners != nil && pl.owners.LeaderWorkerSets != nil {
		resources = append(append([]fwk.EventResource(nil), resources...), lwsEventResource)
	}
	for _, r := range resources {
		events = append(events, fwk.ClusterEventWithHint{
			Event: fwk.ClusterEvent{Resource: r, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: isSchedulableAfterOwnerChange,
		})
	}
	return events, nil
}

// isSchedulableAfterOwnerChange queues the pod when a workload of its own
// namespace appeared or changed: only those can complete its chain.
func isSchedulableAfterOwnerChange(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	obj, err := meta.Accessor(newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("unexpected object in isSchedulableAfterOwnerChange: %w", err)
	}
	if obj.GetNamespace() != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Workload of the pod's namespace changed", "pod", klog.KObj(pod), "workload", klog.KObj(obj))
	return fwk.Queue, nil
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
