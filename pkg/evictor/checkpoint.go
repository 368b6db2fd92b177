package evictor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// checkpointed is how a checkpoint ended.
type checkpointed struct {
	outcome CheckpointOutcome
	waited  time.Duration
	// gone, when set, says why the pod needs no eviction any more.
	gone string
}

// checkpoint asks pod to checkpoint as decl says and waits for the
// acknowledgement or the grace. A request an earlier run made (the
// pod's rota.dev/checkpoint-requested) whose grace has not ended is
// resumed rather than made again.
func (e *Evictor) checkpoint(ctx context.Context, v Victim, pod *v1.Pod, decl Declaration, related runtime.Object) (checkpointed, error) {
	logger := klog.FromContext(ctx)
	now := e.clock.Now()
	start, requested := now, now.UTC().Format(time.RFC3339)
	resumed := false
	if prev, ok := pod.Annotations[gpuv1.CheckpointRequestedAnnotation]; ok {
		if t, err := time.Parse(time.RFC3339, prev); err == nil && !t.After(now) && now.Before(t.Add(decl.Grace)) {
			start, requested, resumed = t, prev, true
		}
	}
	deadline := start.Add(decl.Grace)
	if !resumed {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid":         v.UID, // a precondition: the API server refuses the patch for a pod of another UID
			"annotations": map[string]string{gpuv1.CheckpointRequestedAnnotation: requested},
		}})
		if err != nil {
			return checkpointed{}, fmt.Errorf("encoding the checkpoint request: %w", err)
		}
		_, err = e.client.CoreV1().Pods(v.Pod.Namespace).Patch(ctx, v.Pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return checkpointed{gone: "gone"}, nil
		case apierrors.IsConflict(err):
			return checkpointed{gone: "replaced"}, nil
		case err != nil:
			return checkpointed{}, fmt.Errorf("requesting the checkpoint of pod %s: %w", v.Pod, err)
		}
	}
	e.update(v.UID, func(s *Status) { s.Phase, s.Requested, s.Deadline = Checkpointing, start, deadline })
	logger.V(2).Info("Checkpoint requested", "requested", requested, "deadline", deadline, "resumed", resumed)

	done := func(outcome CheckpointOutcome, eventType, format string, args ...any) (checkpointed, error) {
		e.metrics.checkpoint(outcome)
		e.recorder.Eventf(pod, related, eventType, gpuv1.CheckpointEventReason, actionCheckpoint, format, args...)
		return checkpointed{outcome: outcome, waited: e.clock.Since(start)}, nil
	}
	after := func() string { return e.clock.Since(start).Round(time.Second).String() }
	if pod.Annotations[gpuv1.CheckpointedAnnotation] == requested {
		return done(Acknowledged, v1.EventTypeNormal, "acknowledged after %s (annotation %s)", after(), gpuv1.CheckpointedAnnotation)
	}

	timer := e.clock.NewTimer(deadline.Sub(now))
	defer timer.Stop()
	// A timer rather than a ticker: a stopped fake ticker keeps waiting,
	// which tests could not tell from a running one.
	poll := e.clock.NewTimer(e.poll)
	defer poll.Stop()
	var posted chan error
	if decl.HTTP != nil {
		postCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		posted = make(chan error, 1)
		req := CheckpointRequest{Requested: requested, Deadline: deadline.UTC().Format(time.RFC3339), Tenant: v.For.Tenant}
		go func() { posted <- e.notifier.Notify(postCtx, pod, *decl.HTTP, req) }()
	}
	var postErr error
	for {
		select {
		case <-ctx.Done():
			return checkpointed{}, fmt.Errorf("waiting for the checkpoint of pod %s: %w", v.Pod, ctx.Err())
		case err := <-posted:
			if err == nil {
				return done(Acknowledged, v1.EventTypeNormal, "acknowledged after %s (POST to port %s)", after(), decl.HTTP)
			}
			logger.V(2).Info("Checkpoint POST failed; waiting for the annotation", "err", err)
			postErr, posted = err, nil
			e.update(v.UID, func(s *Status) { s.NotifyError = err.Error() })
		case <-poll.C():
			p, err := e.readPod(ctx, v.Pod)
			if why := goneReason(p, err, v.UID); why != "" {
				return checkpointed{gone: why}, nil
			}
			if err != nil {
				logger.V(2).Info("Reading the pod for its checkpoint acknowledgement failed", "err", err)
			} else if p.Annotations[gpuv1.CheckpointedAnnotation] == requested {
				return done(Acknowledged, v1.EventTypeNormal, "acknowledged after %s (annotation %s)", after(), gpuv1.CheckpointedAnnotation)
			}
			poll.Reset(e.poll)
		case <-timer.C():
			if postErr != nil {
				return done(GraceExpired, v1.EventTypeWarning, "no acknowledgement within grace %s (%v); evicting", decl.Grace, postErr)
			}
			return done(GraceExpired, v1.EventTypeWarning, "no acknowledgement within grace %s; evicting", decl.Grace)
		}
	}
}

// readPod reads the pod from the lister when there is one, else from the
// API server.
func (e *Evictor) readPod(ctx context.Context, key types.NamespacedName) (*v1.Pod, error) {
	if e.pods != nil {
		return e.pods.Pods(key.Namespace).Get(key.Name)
	}
	return e.client.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
}
