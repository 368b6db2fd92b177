package evictor

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Event actions (events/v1's action field).
const (
	actionReclaim    = "Reclaim"
	actionCheckpoint = "Checkpoint"
	actionEvict      = "Evict"
)

// reclaim carries one victim out.
func (e *Evictor) reclaim(ctx context.Context, v Victim) (Result, error) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(v.Pod.Namespace, v.Pod.Name), "podUID", v.UID, "reclaimFor", v.For.Tenant)
	ctx = klog.NewContext(ctx, logger)
	var res Result
	pod, err := e.client.CoreV1().Pods(v.Pod.Namespace).Get(ctx, v.Pod.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.metrics.eviction(Error)
		res.Eviction = Error
		return res, fmt.Errorf("get pod %s: %w", v.Pod, err)
	}
	if why := goneReason(pod, err, v.UID); why != "" {
		logger.V(2).Info("Reclaim victim needs no eviction", "why", why)
		e.metrics.eviction(Gone)
		res.Eviction = Gone
		return res, nil
	}

	decl, declErr := declarationOf(pod)
	related := v.For.related()
	e.recorder.Eventf(pod, related, v1.EventTypeNormal, gpuv1.ReclaimingEventReason, actionReclaim, "%s", reclaimingNote(v, decl, declErr))

	switch {
	case declErr != nil:
		e.recorder.Eventf(pod, related, v1.EventTypeWarning, gpuv1.CheckpointEventReason, actionCheckpoint, "%s; evicting without a checkpoint", declErr.Error())
		e.metrics.checkpoint(Invalid)
		res.Checkpoint = Invalid
	case decl == nil:
		e.metrics.checkpoint(Undeclared)
		res.Checkpoint = Undeclared
	default:
		cp, err := e.checkpoint(ctx, v, pod, *decl, related)
		switch {
		case err != nil && ctx.Err() != nil:
			return res, err
		case err != nil:
			e.metrics.eviction(Error)
			e.recorder.Eventf(pod, related, v1.EventTypeWarning, gpuv1.ReclaimBlockedEventReason, actionCheckpoint,
				"%v; not evicted, the pod keeps running", err)
			res.Eviction = Error
			return res, err
		case cp.gone != "":
			logger.V(2).Info("Reclaim victim went during its checkpoint", "why", cp.gone)
			e.metrics.eviction(Gone)
			res.Eviction = Gone
			return res, nil
		}
		res.Checkpoint, res.Waited = cp.outcome, cp.waited
	}

	res.Eviction, err = e.evict(ctx, v, pod, related)
	return res, err
}

// reclaimingNote is the Reclaiming Event's note: why the pod is taken and
// what happens next.
func reclaimingNote(v Victim, decl *Declaration, declErr error) string {
	note := v.Reason()
	switch {
	case declErr != nil:
		return note + "; its checkpoint declaration is invalid, evicting without a checkpoint"
	case decl == nil:
		return note + "; it declares no checkpoint (" + gpuv1.CheckpointAnnotation + "), evicting now"
	case decl.HTTP != nil:
		return note + "; asking it to checkpoint within " + decl.Grace.String() +
			" (annotation " + gpuv1.CheckpointRequestedAnnotation + ", POST to port " + decl.HTTP.String() + ")"
	}
	return note + "; asking it to checkpoint within " + decl.Grace.String() + " (annotation " + gpuv1.CheckpointRequestedAnnotation + ")"
}

// declarationOf parses pod's checkpoint declaration; nil when it has none.
func declarationOf(pod *v1.Pod) (*Declaration, error) {
	raw, ok := pod.Annotations[gpuv1.CheckpointAnnotation]
	if !ok {
		return nil, nil
	}
	d, err := ParseDeclaration(raw)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// goneReason says why pod (read with err) needs no eviction any more:
// gone, replaced by a pod of another UID, or terminating; "" when it is
// still the victim.
func goneReason(pod *v1.Pod, err error, uid types.UID) string {
	switch {
	case apierrors.IsNotFound(err):
		return "gone"
	case err != nil:
		return ""
	case pod.UID != uid:
		return fmt.Sprintf("replaced (UID %s)", pod.UID)
	case pod.DeletionTimestamp != nil:
		return "already terminating"
	}
	return ""
}
