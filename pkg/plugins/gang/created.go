package gang

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// watchCreatedMembers wakes a gang's waiting members when its last member
// is created. A member tried before the rest of its gang existed waits as
// unschedulable ("waiting for the rest to be created"), and the event that
// should retry it, an unscheduled pod added, reaches other pods' queueing
// hints in kube-scheduler 1.37 only with the GenericWorkload feature gate:
// without this handler the member would wait for some unrelated event or
// the queue's five-minute flush. Activate also covers a member still in
// its scheduling cycle: the queue retries it when the cycle ends.
func (pl *Gang) watchCreatedMembers(ctx context.Context, informer cache.SharedIndexInformer) error {
	_, err := informer.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				pl.memberCreated(ctx, pod)
			}
		},
	}, cache.HandlerOptions{Logger: ptr.To(klog.FromContext(ctx))})
	return err
}

// memberCreated activates the gang's other unbound members once every
// member of pod's gang exists.
func (pl *Gang) memberCreated(ctx context.Context, pod *v1.Pod) {
	key, size, ok, err := gangOf(pod)
	if !ok || err != nil || pod.Spec.NodeName != "" {
		return
	}
	members := pl.memberPods(key)
	wake := map[string]*v1.Pod{}
	for _, p := range members {
		if p.Spec.NodeName == "" && p.UID != pod.UID {
			wake[p.Namespace+"/"+p.Name] = p
		}
	}
	if len(members) < size || len(wake) == 0 {
		return
	}
	klog.FromContext(ctx).V(4).Info("Gang complete: waking its members", "gang", key, "members", len(members))
	pl.handle.Activate(klog.FromContext(ctx), wake)
}
