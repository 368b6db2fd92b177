package controller

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// acquirer is the acquire step (docs/schedule.md, "Executing a transition"):
// it starts a Start or a scale-up once a capacity preview says its pods fit,
// and keeps it waiting for capacity until the capacity timeout otherwise.
// Whether it has converged is the convergence step's call.
type acquirer struct {
	client    kubernetes.Interface
	previewer *preview.Previewer
	demand    demands
	submit    submitter
	out       outcomes
	now       time.Time
	timeouts  *v1alpha1.ScheduleTimeouts
	// progress is how soon a step in flight is looked at again.
	progress time.Duration
}

// start previews the step's pods and submits the step when they fit.
// parked: the step waits for capacity (or has just stopped waiting, failed),
// so no later acquire step may start this pass. recheck is how soon the
// schedule wants another pass (0: no wish).
func (a acquirer) start(ctx context.Context, t *target, s *v1alpha1.TransitionStep) (parked bool, recheck time.Duration, err error) {
	fits, msg, err := a.capacityPreview(ctx, t, s)
	if err != nil {
		return false, 0, err
	}
	if !fits {
		return true, a.capacityWait(t, s, msg), nil
	}
	accepted, err := a.submit.submit(ctx, t, s, true)
	if err != nil || !accepted {
		return false, 0, err
	}
	return false, a.progress, nil
}

// capacityWait keeps an acquire step waiting for GPUs, or fails it once the
// capacity timeout after the boundary has passed (or the interval ends, see
// planner.open). The released targets are not restarted. It returns how soon
// to look again (0 once failed).
func (a acquirer) capacityWait(t *target, s *v1alpha1.TransitionStep, msg string) time.Duration {
	timeout := timeoutOf(a.timeouts, func(t *v1alpha1.ScheduleTimeouts) *v1alpha1.Duration { return t.Capacity }, DefaultCapacityTimeout)
	deadline := t.interval.Start.Add(timeout)
	if !a.now.Before(deadline) {
		a.out.fail(s, ReasonCapacityUnavailable, fmt.Sprintf("still no room %s after the boundary: %s", timeout, msg))
		return 0
	}
	s.Reason, s.Message = ReasonCapacityWait, truncate(msg, 1024)
	return min(a.progress, deadline.Sub(a.now))
}

// capacityPreview asks the real DRA allocator, read-only, whether the pods the
// step adds fit the pool as it is now.
func (a acquirer) capacityPreview(ctx context.Context, t *target, s *v1alpha1.TransitionStep) (bool, string, error) {
	demand, err := a.demand.ofReplica(ctx, t, true)
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
	in, err := previewInputs(ctx, a.client)
	if err != nil {
		return false, "", err
	}
	res, err := a.previewer.Check(ctx, in, demands...)
	if err != nil {
		return false, "", fmt.Errorf("capacity preview for %s: %w", t.spec.Name, err)
	}
	return res.Fits, res.Message, nil
}

// previewInputs reads the cluster's DRA state for a preview.
func previewInputs(ctx context.Context, client kubernetes.Interface) (preview.Inputs, error) {
	var in preview.Inputs
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list Nodes: %w", err)
	}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list ResourceSlices: %w", err)
	}
	claims, err := client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list ResourceClaims: %w", err)
	}
	classes, err := client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
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
