package evictor

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// evict sends the victim's Eviction with its UID as a precondition,
// retrying within e.retry while the API server answers 429 (a
// PodDisruptionBudget).
func (e *Evictor) evict(ctx context.Context, v Victim, pod *v1.Pod, related runtime.Object) (EvictionResult, error) {
	logger := klog.FromContext(ctx)
	e.update(v.UID, func(s *Status) { s.Phase = Evicting })
	uid := v.UID
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: v.Pod.Namespace, Name: v.Pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	wait := e.retry.Initial
	for try := 1; ; try++ {
		err := e.client.PolicyV1().Evictions(v.Pod.Namespace).Evict(ctx, eviction)
		switch {
		case err == nil:
			logger.V(1).Info("Evicted for a reclaim", "tries", try)
			e.metrics.eviction(Evicted)
			e.recorder.Eventf(pod, related, v1.EventTypeNormal, gpuv1.ReclaimEventReason, actionEvict, "evicted: %s", v.Reason())
			return Evicted, nil
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Conflict: the UID precondition failed, the name holds a new pod.
			logger.V(2).Info("Reclaim victim went before its eviction", "err", err)
			e.metrics.eviction(Gone)
			return Gone, nil
		case !apierrors.IsTooManyRequests(err):
			e.metrics.eviction(Error)
			e.recorder.Eventf(pod, related, v1.EventTypeWarning, gpuv1.ReclaimBlockedEventReason, actionEvict,
				"eviction failed: %v; the pod keeps running (%s)", err, v.Reason())
			return Error, fmt.Errorf("evict pod %s: %w", v.Pod, err)
		}
		e.update(v.UID, func(s *Status) { s.Refusals = try })
		if try >= e.retry.Tries {
			e.metrics.eviction(PDBBlocked)
			e.recorder.Eventf(pod, related, v1.EventTypeWarning, gpuv1.ReclaimBlockedEventReason, actionEvict,
				"eviction refused %d times, last: %s; the pod keeps running (%s)", try, refusal(err), v.Reason())
			return PDBBlocked, nil
		}
		logger.V(2).Info("Eviction refused; retrying", "try", try, "in", wait, "err", err)
		timer := e.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return "", fmt.Errorf("evict pod %s: %w", v.Pod, ctx.Err())
		case <-timer.C():
		}
		wait = min(2*wait, max(e.retry.Max, e.retry.Initial))
	}
}

// refusal says why the API server refused an eviction, naming the
// budget's cause when it gives one.
func refusal(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause {
				return c.Message
			}
		}
	}
	return err.Error()
}
