package tiering

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
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
	if len(p.passedOver) > 0 {
		if v, err := waits.EncodePassedOver(p.passedOver); err == nil {
			binding.Annotations[gpuv1.PassedOverAnnotation] = v
		}
	}
	logger.V(3).Info("Binding tiered pod", "pod", klog.KObj(pod), "node", klog.KRef("", nodeName), "tier", binding.Annotations[gpuv1.TierAnnotation])
	if err := pl.bind(ctx, binding); err != nil {
		cause := waits.BindError
		if apierrors.IsConflict(err) {
			cause = waits.BindingConflict
		}
		pl.metrics.bindingFailures.WithLabelValues(string(cause), stageBind).Inc()
		return statusError(logger, fmt.Errorf("%s: bind pod %s to node %s: %w", cause, klog.KObj(pod), nodeName, err), "pod", klog.KObj(pod), "node", nodeName)
	}
	return nil
}

// The stages a placement can fail to bind at, the stage label of
// rota_tiering_binding_failures_total.
const (
	stageReserve = "reserve"
	stagePreBind = "prebind"
	stageBind    = "bind"
)

// bindFailed counts a placement that cannot be bound and returns the
// status that sends the pod back to the queue, its message starting with
// the cause.
func (pl *Tiering) bindFailed(logger klog.Logger, pod *v1.Pod, stage string, cause waits.BindFailure, msg string) *fwk.Status {
	pl.metrics.bindingFailures.WithLabelValues(string(cause), stage).Inc()
	return statusUnschedulable(logger.WithCallDepth(1), string(cause)+": "+msg, "pod", klog.KObj(pod), "stage", stage)
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
