package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// convergence is the convergence step (docs/schedule.md, "Executing a
// transition"): it decides whether an accepted step has converged, has
// failed for good, or is still under way.
type convergence struct {
	client    kubernetes.Interface
	workloads workloadAccess
	namespace string // the schedule's
	now       time.Time
	timeouts  *v1alpha1.ScheduleTimeouts
	// unschedulableGrace is how long a started pod may be unschedulable.
	unschedulableGrace time.Duration
	out                outcomes
}

// released decides whether an accepted release step has converged: the
// workload is at the new scale, its extra pods are gone and the claims those
// pods had are deallocated (evidence the GPUs are free). Past the stop timeout
// it fails with StopTimeout.
// A scale-down that leaves replicas running returns the CapacityReduced
// event to emit once it has converged.
func (c convergence) released(ctx context.Context, t *target, s *v1alpha1.TransitionStep) (*event, error) {
	wl, err := c.workloads.get(ctx, c.namespace, t.spec.WorkloadRef)
	if err != nil {
		return nil, fmt.Errorf("check release of %s: %w", t.spec.Name, err)
	}
	want := replicasOf(s)
	var waiting []string
	if wl.Replicas != want {
		waiting = append(waiting, fmt.Sprintf("spec.replicas is %d, not %d (changed by someone else?)", wl.Replicas, want))
	}
	if wl.ObservedGeneration < wl.Generation || wl.StatusReplicas > want {
		waiting = append(waiting, fmt.Sprintf("%s reports %d replicas", wl.Kind, wl.StatusReplicas))
	}
	pods, err := c.workloads.pods(ctx, wl)
	if err != nil {
		return nil, err
	}
	if int32(len(pods)) > want*wl.podsPerReplica() {
		terminating := 0
		for _, pod := range pods {
			if pod.DeletionTimestamp != nil {
				terminating++
			}
		}
		waiting = append(waiting, fmt.Sprintf("%d pods still present (%d terminating)", len(pods), terminating))
	}
	held, err := c.claimsOfGonePods(ctx, wl, pods)
	if err != nil {
		return nil, err
	}
	if len(held) > 0 {
		waiting = append(waiting, fmt.Sprintf("ResourceClaims still allocated: %s", strings.Join(held, ", ")))
	}
	if len(waiting) == 0 {
		msg := fmt.Sprintf("%s %s at %d replicas, pods gone, claims deallocated", wl.Kind, wl.Name, want)
		c.out.succeed(s, msg)
		if s.Action == actionScale && want > 0 {
			return &event{warning: true, reason: ReasonCapacityReduced,
				message: fmt.Sprintf("target %s scaled down to %d replicas at the boundary of window %s", t.spec.Name, want, t.interval.Source)}, nil
		}
		return nil, nil
	}
	timeout := timeoutOf(c.timeouts, func(t *v1alpha1.ScheduleTimeouts) *v1alpha1.Duration { return t.Stop }, DefaultStopTimeout)
	if s.SubmittedAt != nil && !c.now.Before(s.SubmittedAt.Add(timeout)) {
		c.out.fail(s, ReasonStopTimeout, withFix(ReasonStopTimeout, fmt.Sprintf("not released %s after submission: %s", timeout, strings.Join(waiting, "; "))))
		return nil, nil
	}
	s.Message = truncate("releasing: "+strings.Join(waiting, "; "), 1024)
	return nil, nil
}

// claimsOfGonePods lists allocated claims that were generated for pods of wl
// that no longer exist. Generated claims are owned by their pod, whose name
// starts with the workload's name.
func (c convergence) claimsOfGonePods(ctx context.Context, wl *workload, pods []v1.Pod) ([]string, error) {
	live := sets.New[string]()
	for _, pod := range pods {
		live.Insert(string(pod.UID))
	}
	claims, err := c.client.ResourceV1().ResourceClaims(wl.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	var held []string
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, ref := range claim.OwnerReferences {
			if ref.Kind == "Pod" && strings.HasPrefix(ref.Name, wl.Name+"-") && !live.Has(string(ref.UID)) {
				held = append(held, claim.Name)
				break
			}
		}
	}
	return held, nil
}

// acquired decides whether an accepted acquire step has converged: the
// workload reports the new generation observed and all replicas ready.
func (c convergence) acquired(ctx context.Context, t *target, s *v1alpha1.TransitionStep) error {
	wl, err := c.workloads.get(ctx, c.namespace, t.spec.WorkloadRef)
	if err != nil {
		return fmt.Errorf("check acquire of %s: %w", t.spec.Name, err)
	}
	want := replicasOf(s)
	if wl.ObservedGeneration >= wl.Generation && wl.Replicas == want && wl.ReadyReplicas >= want && wl.UpdatedReplicas >= want {
		c.out.succeed(s, fmt.Sprintf("%s %s at %d ready replicas", wl.Kind, wl.Name, want))
		return nil
	}
	pods, err := c.workloads.pods(ctx, wl)
	if err != nil {
		return err
	}
	var since time.Duration
	if s.SubmittedAt != nil {
		since = c.now.Sub(s.SubmittedAt.Time)
	}
	for _, pod := range pods {
		for _, cond := range pod.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable && since >= c.unschedulableGrace {
				c.out.fail(s, ReasonStartUnschedulable, withFix(ReasonStartUnschedulable, fmt.Sprintf(
					"pod %s is unschedulable %s after the start: %s", pod.Name, since.Round(time.Second), cond.Message)))
				return nil
			}
		}
	}
	timeout := timeoutOf(c.timeouts, func(t *v1alpha1.ScheduleTimeouts) *v1alpha1.Duration { return t.Readiness }, DefaultReadinessTimeout)
	if since >= timeout {
		c.out.fail(s, ReasonReadinessTimeout, withFix(ReasonReadinessTimeout, fmt.Sprintf(
			"%d of %d replicas ready %s after the start", wl.ReadyReplicas, want, timeout)))
		return nil
	}
	s.Message = fmt.Sprintf("acquiring: %d of %d replicas ready", wl.ReadyReplicas, want)
	return nil
}
