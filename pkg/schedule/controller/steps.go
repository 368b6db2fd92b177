package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// Step actions (the values of TransitionStep.Action).
const (
	actionStop  = string(schedule.ActionStop)
	actionStart = string(schedule.ActionStart)
	actionScale = string(schedule.ActionScale)
)

// planStep compares the workload as observed with the intent and returns the
// one step that reaches it, if any. Planning from the observed scale (not from
// the previous intent) makes a missed boundary or a first pass land on the
// current intent in one step.
func planStep(in schedule.Intent, wl *workload) (v1alpha1.TransitionStep, bool) {
	cur := wl.Replicas
	mk := func(action string, group v1alpha1.StepGroup, replicas int32) (v1alpha1.TransitionStep, bool) {
		return v1alpha1.TransitionStep{Action: action, Group: group, Replicas: ptr.To(replicas), Phase: v1alpha1.StepPlanned}, true
	}
	switch {
	case in.State == v1alpha1.StateStopped:
		if cur > 0 {
			return mk(actionStop, v1alpha1.StepGroupRelease, 0)
		}
	case cur == 0:
		n := in.Replicas
		if n == 0 {
			n = restoreReplicas(wl)
		}
		return mk(actionStart, v1alpha1.StepGroupAcquire, n)
	case in.Replicas != 0 && cur > in.Replicas:
		return mk(actionScale, v1alpha1.StepGroupRelease, in.Replicas)
	case in.Replicas != 0 && cur < in.Replicas:
		return mk(actionScale, v1alpha1.StepGroupAcquire, in.Replicas)
	}
	return v1alpha1.TransitionStep{}, false
}

// restoreReplicas is the scale an unpinned Start brings a workload back to:
// what it had when a schedule stopped it, else 1.
func restoreReplicas(wl *workload) int32 {
	if v, err := strconv.ParseInt(wl.Annotations[gpuv1.ReplicasBeforeStopAnnotation], 10, 32); err == nil && v > 0 {
		return int32(v)
	}
	return 1
}

// finishSubmitting re-submits every step left Submitting. With the gate
// closed it only recognises mutations that already happened.
func (p *pass) finishSubmitting(ctx context.Context) error {
	for _, t := range p.targets {
		for i := range t.status.Steps {
			s := &t.status.Steps[i]
			if s.Phase != v1alpha1.StepSubmitting {
				continue
			}
			if err := p.submit(ctx, t, s, p.gateOK); err != nil {
				return err
			}
		}
	}
	return nil
}

// submit runs a step's mutation with crash safety: record Submitting (CAS),
// mutate the workload carrying the key (CAS on the workload, skipped when the
// key is already there), record Accepted (CAS). write=false only recognises.
func (p *pass) submit(ctx context.Context, t *target, s *v1alpha1.TransitionStep, write bool) error {
	logger := klog.FromContext(ctx).WithValues("target", t.spec.Name, "key", s.Key)
	if s.Phase == v1alpha1.StepPlanned {
		s.Phase, s.SubmittedAt, s.Reason, s.Message = v1alpha1.StepSubmitting, p.nowTime(), "", ""
		if err := p.persist(ctx); err != nil {
			return err
		}
	}
	if err := p.c.opts.Failpoints.BeforeMutation(ctx, s.Key); err != nil {
		return fmt.Errorf("failpoint before mutation of %s: %w", s.Key, err)
	}
	wl, err := p.c.getWorkload(ctx, p.ds.Namespace, t.spec.WorkloadRef)
	if err != nil {
		return fmt.Errorf("step %s: %w", s.Key, err)
	}
	wrote := false
	if wl.Annotations[gpuv1.TransitionKeyAnnotation] != s.Key {
		if !write {
			return nil
		}
		ch, err := p.changeFor(ctx, t, s, wl)
		if err != nil {
			return fmt.Errorf("step %s: %w", s.Key, err)
		}
		if err := p.c.updateWorkload(ctx, wl, ch); err != nil {
			if apierrors.IsConflict(err) {
				// Someone else wrote the workload; the next pass re-reads it and
				// recognises the key if it was the same step.
				return errConflict
			}
			return fmt.Errorf("step %s: %w", s.Key, err)
		}
		wrote = true
		p.c.metrics.actions.WithLabelValues(s.Action, ReasonSubmitted).Inc()
		logger.V(2).Info("Workload mutated", "workload", klog.KRef(wl.Namespace, wl.Name), "replicas", ptr.Deref(s.Replicas, 0))
	}
	if err := p.c.opts.Failpoints.AfterMutation(ctx, s.Key, wrote); err != nil {
		return fmt.Errorf("failpoint after mutation of %s: %w", s.Key, err)
	}
	s.Phase, s.Reason = v1alpha1.StepAccepted, ReasonSubmitted
	s.Message = fmt.Sprintf("%s %s to %d replicas accepted", s.Action, t.spec.WorkloadRef.Name, ptr.Deref(s.Replicas, 0))
	if err := p.persist(ctx); err != nil {
		return err
	}
	p.wantRequeue(p.c.opts.ProgressPeriod)
	return nil
}

// changeFor is the workload change a step makes.
func (p *pass) changeFor(ctx context.Context, t *target, s *v1alpha1.TransitionStep, wl *workload) (change, error) {
	ch := change{Replicas: ptr.Deref(s.Replicas, 0), Annotations: map[string]string{gpuv1.TransitionKeyAnnotation: s.Key}}
	if s.Action == actionStop && wl.Replicas > 0 {
		ch.Annotations[gpuv1.ReplicasBeforeStopAnnotation] = strconv.Itoa(int(wl.Replicas))
	}
	if s.Group == v1alpha1.StepGroupAcquire && t.spec.ReservationName != "" {
		templates, err := p.pinToReservation(ctx, t, wl)
		if err != nil {
			return ch, err
		}
		ch.ClaimTemplates = templates
	}
	return ch, nil
}

func (p *pass) failStep(t *target, s *v1alpha1.TransitionStep, reason, msg string) {
	if !strings.Contains(msg, "Fix: ") {
		msg = withFix(reason, msg)
	}
	s.Phase, s.Reason, s.Message, s.CompletedAt = v1alpha1.StepFailed, reason, truncate(msg, 1024), p.nowTime()
	p.c.metrics.actions.WithLabelValues(s.Action, reason).Inc()
}

func (p *pass) succeedStep(s *v1alpha1.TransitionStep, msg string) {
	s.Phase, s.Reason, s.Message, s.CompletedAt = v1alpha1.StepSucceeded, ReasonConverged, truncate(msg, 1024), p.nowTime()
	p.c.metrics.actions.WithLabelValues(s.Action, ReasonConverged).Inc()
}
