package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// checkReleased decides whether an accepted release step has converged: the
// workload is at the new scale, its extra pods are gone and the claims those
// pods had are deallocated (evidence the GPUs are free). Past the stop timeout
// it fails with StopTimeout.
func (p *pass) checkReleased(ctx context.Context, t *target, s *v1alpha1.TransitionStep) error {
	wl, err := p.c.getWorkload(ctx, p.ds.Namespace, t.spec.WorkloadRef)
	if err != nil {
		return fmt.Errorf("check release of %s: %w", t.spec.Name, err)
	}
	want := replicasOf(s)
	var waiting []string
	if wl.Replicas != want {
		waiting = append(waiting, fmt.Sprintf("spec.replicas is %d, not %d (changed by someone else?)", wl.Replicas, want))
	}
	if wl.ObservedGeneration < wl.Generation || wl.StatusReplicas > want {
		waiting = append(waiting, fmt.Sprintf("%s reports %d replicas", wl.Kind, wl.StatusReplicas))
	}
	pods, err := wl.pods(ctx, p.c.opts.Client)
	if err != nil {
		return err
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
	held, err := p.claimsOfGonePods(ctx, wl, pods)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		waiting = append(waiting, fmt.Sprintf("ResourceClaims still allocated: %s", strings.Join(held, ", ")))
	}
	if len(waiting) == 0 {
		msg := fmt.Sprintf("%s %s at %d replicas, pods gone, claims deallocated", wl.Kind, wl.Name, want)
		p.succeedStep(s, msg)
		if s.Action == actionScale && want > 0 {
			p.events = append(p.events, event{warning: true, reason: ReasonCapacityReduced,
				message: fmt.Sprintf("target %s scaled down to %d replicas at the boundary of window %s", t.spec.Name, want, t.interval.Source)})
		}
		return nil
	}
	timeout := p.timeout(p.ds.Spec.Timeouts, func(t *v1alpha1.ScheduleTimeouts) *v1alpha1.Duration { return t.Stop }, DefaultStopTimeout)
	if s.SubmittedAt != nil && !p.now.Before(s.SubmittedAt.Add(timeout)) {
		p.failStep(t, s, ReasonStopTimeout, withFix(ReasonStopTimeout, fmt.Sprintf("not released %s after submission: %s", timeout, strings.Join(waiting, "; "))))
		return nil
	}
	s.Message = truncate("releasing: "+strings.Join(waiting, "; "), 1024)
	return nil
}

// claimsOfGonePods lists allocated claims that were generated for pods of wl
// that no longer exist. Generated claims are owned by their pod, whose name
// starts with the workload's name.
func (p *pass) claimsOfGonePods(ctx context.Context, wl *workload, pods []v1.Pod) ([]string, error) {
	live := sets.New[string]()
	for _, pod := range pods {
		live.Insert(string(pod.UID))
	}
	claims, err := p.c.opts.Client.ResourceV1().ResourceClaims(wl.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	var held []string
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, ref := range c.OwnerReferences {
			if ref.Kind == "Pod" && strings.HasPrefix(ref.Name, wl.Name+"-") && !live.Has(string(ref.UID)) {
				held = append(held, c.Name)
				break
			}
		}
	}
	return held, nil
}

// checkAcquired decides whether an accepted acquire step has converged: the
// workload reports the new generation observed and all replicas ready.
func (p *pass) checkAcquired(ctx context.Context, t *target, s *v1alpha1.TransitionStep) error {
	wl, err := p.c.getWorkload(ctx, p.ds.Namespace, t.spec.WorkloadRef)
	if err != nil {
		return fmt.Errorf("check acquire of %s: %w", t.spec.Name, err)
	}
	want := replicasOf(s)
	if wl.ObservedGeneration >= wl.Generation && wl.Replicas == want && wl.ReadyReplicas >= want && wl.UpdatedReplicas >= want {
		p.succeedStep(s, fmt.Sprintf("%s %s at %d ready replicas", wl.Kind, wl.Name, want))
		return nil
	}
	pods, err := wl.pods(ctx, p.c.opts.Client)
	if err != nil {
		return err
	}
	var since time.Duration
	if s.SubmittedAt != nil {
		since = p.now.Sub(s.SubmittedAt.Time)
	}
	for _, pod := range pods {
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable && since >= p.c.opts.UnschedulableGrace {
				p.failStep(t, s, ReasonStartUnschedulable, withFix(ReasonStartUnschedulable, fmt.Sprintf(
					"pod %s is unschedulable %s after the start: %s", pod.Name, since.Round(time.Second), c.Message)))
				return nil
			}
		}
	}
	timeout := p.timeout(p.ds.Spec.Timeouts, func(t *v1alpha1.ScheduleTimeouts) *v1alpha1.Duration { return t.Readiness }, DefaultReadinessTimeout)
	if since >= timeout {
		p.failStep(t, s, ReasonReadinessTimeout, withFix(ReasonReadinessTimeout, fmt.Sprintf(
			"%d of %d replicas ready %s after the start", wl.ReadyReplicas, want, timeout)))
		return nil
	}
	s.Message = fmt.Sprintf("acquiring: %d of %d replicas ready", wl.ReadyReplicas, want)
	return nil
}

// capacityPreview asks the real DRA allocator, read-only, whether the pods the
// step adds fit the pool as it is now.
func (p *pass) capacityPreview(ctx context.Context, t *target, s *v1alpha1.TransitionStep) (bool, string, error) {
	demand, err := p.replicaDemand(ctx, t, true)
	if err != nil {
		return false, "", fmt.Errorf("capacity preview for %s: %w", t.spec.Name, err)
	}
	need := int(replicasOf(s)) - int(t.wl.Replicas)
	var demands []preview.Demand
	for _, d := range demand {
		if len(d.Specs) > 0 && need > 0 {
			demands = append(demands, preview.Demand{PodClaims: d.Specs, Pods: need * int(d.Pods)})
		}
	}
	if len(demands) == 0 {
		return true, "", nil
	}
	in, err := p.c.previewInputs(ctx)
	if err != nil {
		return false, "", err
	}
	res, err := p.c.previewer.Check(ctx, in, demands...)
	if err != nil {
		return false, "", fmt.Errorf("capacity preview for %s: %w", t.spec.Name, err)
	}
	return res.Fits, res.Message, nil
}

// previewInputs reads the cluster's DRA state for a preview.
func (c *Controller) previewInputs(ctx context.Context) (preview.Inputs, error) {
	var in preview.Inputs
	nodes, err := c.opts.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list Nodes: %w", err)
	}
	slices, err := c.opts.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list ResourceSlices: %w", err)
	}
	claims, err := c.opts.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list ResourceClaims: %w", err)
	}
	classes, err := c.opts.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list DeviceClasses: %w", err)
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	for i := range slices.Items {
		in.Slices = append(in.Slices, &slices.Items[i])
	}
	for i := range claims.Items {
		in.Claims = append(in.Claims, &claims.Items[i])
	}
	for i := range classes.Items {
		in.Classes = append(in.Classes, &classes.Items[i])
	}
	return in, nil
}
