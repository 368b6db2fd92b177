package tiering

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// EventsToRegister names the cluster changes that can make a pod Tiering
// rejected (a device that turned unhealthy before binding) placeable again:
// devices published or healed, devices freed by claims going away or being
// deallocated, and new nodes.
func (pl *Tiering) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: isSchedulableAfterSliceChange},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: isSchedulableAfterClaimChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}},
	}, nil
}

// isSchedulableAfterSliceChange queues the pod when a slice now offers more
// usable (untainted) devices than before.
func isSchedulableAfterSliceChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldSlice, newSlice, err := util.As[*resourceapi.ResourceSlice](oldObj, newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterSliceChange: %w", err)
	}
	if usableDevices(newSlice) > usableDevices(oldSlice) {
		logger.V(5).Info("ResourceSlice offers more usable devices", "pod", klog.KObj(pod), "resourceslice", klog.KObj(newSlice))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// usableDevices counts a slice's devices without a NoSchedule/NoExecute taint.
func usableDevices(slice *resourceapi.ResourceSlice) int {
	if slice == nil {
		return 0
	}
	n := 0
	for i := range slice.Spec.Devices {
		if gpupool.BlockingTaint(&slice.Spec.Devices[i], nil) == nil {
			n++
		}
	}
	return n
}

// isSchedulableAfterClaimChange queues the pod when a claim gives its
// devices back: deleted while allocated, or its allocation removed.
func isSchedulableAfterClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldClaim, newClaim, err := util.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterClaimChange: %w", err)
	}
	switch {
	case newClaim == nil && oldClaim != nil && oldClaim.Status.Allocation != nil:
		logger.V(5).Info("Allocated claim deleted, its devices are free", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(oldClaim))
		return fwk.Queue, nil
	case oldClaim != nil && newClaim != nil && oldClaim.Status.Allocation != nil && newClaim.Status.Allocation == nil:
		logger.V(5).Info("Claim deallocated, its devices are free", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(newClaim))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
