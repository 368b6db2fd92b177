package waitreason

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/waits"
)

// Causes of StartFailed, the label of rota_admission_start_failures_total.
const (
	causePrepare = "prepare"
	causeCDI     = "cdi"
)

// watchStarts keeps the rota.dev/Waiting condition of the profile's placed
// pods true after binding: a pod whose node cannot start it with its GPUs
// turns StartFailed (docs/admission.md, "Placed but not started"), and
// back to Placed once its containers run. The scheduler is the one
// component that already owns the condition; it learns of the failure
// from what the node reports: the kubelet's FailedPrepareDynamicResources
// Event, watched with a field selector so that no other Event is listed,
// and a container waiting on a CDI error in the pod's status, from the
// scheduler's own pod informer.
func (pl *WaitReason) watchStarts(ctx context.Context, h fwk.Handle) error {
	profile := h.ProfileName()
	ours := func(pod *v1.Pod) bool {
		return pod.Spec.SchedulerName == profile && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil
	}
	_, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			pod, ok := obj.(*v1.Pod)
			if !ok || !ours(pod) {
				return
			}
			if msg, failed := waits.StartFailureFromStatus(pod); failed {
				pl.startFailed(ctx, pod, msg, causeCDI)
			} else if waits.Started(pod) {
				pl.writer.StartRecovered(pod)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch pod starts: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(h.ClientSet(), 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.Set{"reason": waits.KubeletPrepareFailed, "involvedObject.kind": "Pod"}.String()
	}))
	onEvent := func(obj any) {
		ev, ok := obj.(*v1.Event)
		if !ok {
			return
		}
		pod, err := pl.pods.Pods(ev.InvolvedObject.Namespace).Get(ev.InvolvedObject.Name)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				klog.FromContext(ctx).V(3).Info("Could not read the pod of a kubelet event", "event", klog.KObj(ev), "err", err)
			}
			return
		}
		if pod.UID != ev.InvolvedObject.UID || !ours(pod) || waits.Started(pod) {
			return
		}
		if msg, failed := waits.StartFailureFromEvent(ev, pod.Spec.NodeName); failed {
			pl.startFailed(ctx, pod, msg, causePrepare)
		}
	}
	if _, err := factory.Core().V1().Events().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onEvent,
		UpdateFunc: func(_, obj any) { onEvent(obj) },
	}); err != nil {
		return fmt.Errorf("watch kubelet prepare failures: %w", err)
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return nil
}

func (pl *WaitReason) startFailed(ctx context.Context, pod *v1.Pod, msg, cause string) {
	if pl.writer.StartFailed(pod, msg) {
		pl.metrics.startFailures.WithLabelValues(cause, pod.Namespace).Inc()
		klog.FromContext(ctx).V(2).Info("Placed pod cannot start", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "cause", cause, "message", msg)
	}
}
