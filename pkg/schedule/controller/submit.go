package controller

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// checkpointer writes the pass's status now, with compare-and-swap on the
// schedule. Crash safety needs a status write between the parts of one
// workload mutation (docs/schedule.md, "Crash safety"); it is the only way a
// step reaches the status step.
type checkpointer interface {
	checkpoint(ctx context.Context) error
}

// submitter runs a step's workload mutation exactly once: record Submitting
// (CAS on the schedule), mutate the workload carrying the key (CAS on the
// workload, skipped when the key is already there), record Accepted (CAS).
// The release and acquire steps submit through it, and the pass through it
// finishes steps a crash left Submitting.
type submitter struct {
	namespace  string // the schedule's, where its workloads are
	now        time.Time
	workloads  workloadAccess
	pins       reservations
	failpoints Failpoints
	actions    *metrics.CounterVec
	status     checkpointer
}

// submit runs the mutation of step s of target t. write=false only
// recognises a mutation that already happened. accepted: s is now recorded
// Accepted.
func (sub submitter) submit(ctx context.Context, t *target, s *v1alpha1.TransitionStep, write bool) (accepted bool, err error) {
	logger := klog.FromContext(ctx).WithValues("target", t.spec.Name, "key", s.Key)
	if s.Phase == v1alpha1.StepPlanned {
		s.Phase, s.SubmittedAt, s.Reason, s.Message = v1alpha1.StepSubmitting, timeAt(sub.now), "", ""
		if err := sub.status.checkpoint(ctx); err != nil {
			return false, err
		}
	}
	if err := sub.failpoints.BeforeMutation(ctx, s.Key); err != nil {
		return false, fmt.Errorf("failpoint before mutation of %s: %w", s.Key, err)
	}
	wl, err := sub.workloads.get(ctx, sub.namespace, t.spec.WorkloadRef)
	if err != nil {
		return false, fmt.Errorf("step %s: %w", s.Key, err)
	}
	wrote := false
	if wl.Annotations[gpuv1.TransitionKeyAnnotation] != s.Key {
		if !write {
			return false, nil
		}
		ch, err := sub.changeFor(ctx, t, s, wl)
		if err != nil {
			return false, fmt.Errorf("step %s: %w", s.Key, err)
		}
		if err := sub.workloads.update(ctx, wl, ch); err != nil {
			if apierrors.IsConflict(err) {
				// Someone else wrote the workload; the next pass re-reads it and
				// recognises the key if it was the same step.
				return false, errConflict
			}
			return false, fmt.Errorf("step %s: %w", s.Key, err)
		}
		wrote = true
		sub.actions.WithLabelValues(s.Action, ReasonSubmitted).Inc()
		logger.V(2).Info("Workload mutated", "workload", klog.KRef(wl.Namespace, wl.Name), "replicas", replicasOf(s))
	}
	if err := sub.failpoints.AfterMutation(ctx, s.Key, wrote); err != nil {
		return false, fmt.Errorf("failpoint after mutation of %s: %w", s.Key, err)
	}
	s.Phase, s.Reason = v1alpha1.StepAccepted, ReasonSubmitted
	s.Message = fmt.Sprintf("%s %s to %d replicas accepted", s.Action, t.spec.WorkloadRef.Name, replicasOf(s))
	if err := sub.status.checkpoint(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// changeFor is the workload change a step makes: the new scale and the key,
// the scale a Stop leaves behind, and for an acquire step of a target bound
// to a GPUReservation the claim templates pinned to its GPUs.
func (sub submitter) changeFor(ctx context.Context, t *target, s *v1alpha1.TransitionStep, wl *workload) (change, error) {
	ch := change{Replicas: ptr.Deref(s.Replicas, 0), Annotations: map[string]string{gpuv1.TransitionKeyAnnotation: s.Key}}
	if s.Action == actionStop && wl.Replicas > 0 {
		ch.Annotations[gpuv1.ReplicasBeforeStopAnnotation] = strconv.Itoa(int(wl.Replicas))
	}
	if s.Group == v1alpha1.StepGroupAcquire && t.spec.ReservationName != "" {
		templates, err := sub.pins.pin(ctx, t.spec.ReservationName, wl)
		if err != nil {
			return ch, err
		}
		ch.ClaimTemplates = templates
	}
	return ch, nil
}
