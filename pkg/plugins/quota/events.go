package quota

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// EventsToRegister: a pod Quota rejected can fit once its tenant holds
// fewer devices, that is when a claim of its namespace is deleted while
// allocated or deallocated. A GPUQuota change wakes the waiting pods
// itself, once the new terms are in place (wakeWaiting).
func (pl *Quota) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterClaimChange},
	}, nil
}

func (pl *Quota) isSchedulableAfterClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldClaim, newClaim, err := util.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterClaimChange: %w", err)
	}
	if t := pl.tenant(pod.Namespace); t != nil && t.OverLimit == rotav1.OverLimitRefuse {
		return fwk.QueueSkip, nil
	}
	released := (newClaim == nil && oldClaim != nil && oldClaim.Status.Allocation != nil) ||
		(oldClaim != nil && newClaim != nil && oldClaim.Status.Allocation != nil && newClaim.Status.Allocation == nil)
	if released && oldClaim.Namespace == pod.Namespace {
		logger.V(5).Info("Tenant released devices", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(oldClaim))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
