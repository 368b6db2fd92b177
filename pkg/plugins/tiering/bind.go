package tiering

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Bind binds a tiered pod itself so that its rota.dev/tier and
// rota.dev/devices annotations ride on the Binding: kube-apiserver copies a
// Binding's annotations onto the pod in the same write that sets
// spec.nodeName, which saves the separate pod update per placement. Every
// other pod is left to DefaultBinder (Skip); the profile lists Tiering at
// the bind extension point so that it runs first.
func (pl *Tiering) Bind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	p, err := getPlacement(cs)
	if err != nil || len(p.devices) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	logger := klog.FromContext(ctx)
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: pod.Name,
			// The UID makes the apiserver refuse the binding if the pod was
			// replaced by one of the same name, and keys the scheduler's
			// asynchronous API calls for this pod.
			UID:         pod.UID,
			Annotations: map[string]string{gpuv1.TierAnnotation: tierAnnotation(p), gpuv1.DevicesAnnotation: devicesAnnotation(p)},
		},
		Target: v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	logger.V(3).Info("Binding tiered pod", "pod", klog.KObj(pod), "node", klog.KRef("", nodeName), "tier", binding.Annotations[gpuv1.TierAnnotation])
	if err := pl.bind(ctx, binding); err != nil {
		return statusError(logger, fmt.Errorf("bind pod %s to node %s: %w", klog.KObj(pod), nodeName, err), "pod", klog.KObj(pod), "node", nodeName)
	}
	return nil
}

// bind writes the binding the way DefaultBinder does: through the
// scheduler's API cacher when asynchronous API calls are on, else directly,
// retrying transient errors.
func (pl *Tiering) bind(ctx context.Context, binding *v1.Binding) error {
	if c := pl.handle.APICacher(); c != nil {
		onFinish, err := c.BindPod(binding)
		if err != nil {
			return err
		}
		return c.WaitOnFinish(ctx, onFinish)
	}
	return util.BindPod(ctx, pl.handle.ClientSet(), binding)
}
