package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/sandbox/cluster"
)

// controllerLease is the schedule controller's Lease (its --lease-name).
const controllerLease = "rota-schedule-controller"

// inFlight names the work the victim had under way when it was killed.
func (r *runner) inFlight(ctx context.Context, p *proc) []string {
	var work []string
	switch p.kind {
	case KindDriver:
		for _, n := range r.nodes {
			if n.driver != p {
				continue
			}
			if _, _, calls := n.kubelet.Claims(); calls > 0 {
				work = append(work, "driver: a prepare or unprepare call in flight")
			}
			if n.checkpointWriteInFlight() {
				work = append(work, "driver: a checkpoint write in flight")
			}
		}
	case KindController:
		lease, err := r.c.Client.CoordinationV1().Leases(cluster.GateNamespace).Get(ctx, controllerLease, metav1.GetOptions{})
		if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != p.name {
			break
		}
		work = append(work, "schedule-controller: the leader")
		objs, _ := r.c.Watch.Schedules.List(labels.Everything())
		for _, obj := range objs {
			var ds rotav1.DeploySchedule
			if fromUnstructured(obj, &ds) != nil {
				continue
			}
			for _, t := range ds.Status.Targets {
				for _, s := range t.Steps {
					switch s.Phase {
					case rotav1.StepSubmitting:
						work = append(work, "schedule-controller: a step Submitting (status written, workload not yet)")
					case rotav1.StepAccepted:
						work = append(work, "schedule-controller: a step Accepted (workload written, converging)")
					}
				}
			}
		}
	case KindScheduler:
		pods, _ := r.c.Watch.Pods.List(labels.Everything())
		for _, pod := range pods {
			if pod.Spec.SchedulerName == "rota-scheduler" && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && !hasReason(pod) {
				work = append(work, "scheduler: a pod not yet placed nor refused")
				break
			}
		}
	}
	slices.Sort(work)
	return slices.Compact(work)
}

// checkBoundaries judges every window boundary (each minute mark) once
// boundaryGrace has passed since it.
func (r *runner) checkBoundaries(now time.Time) {
	if r.scheduleApplied.IsZero() {
		return
	}
	r.mu.Lock()
	until := r.judgeUntil
	r.mu.Unlock()
	first := r.scheduleApplied.Add(5 * time.Second).Truncate(time.Minute).Add(time.Minute)
	for at := first; !at.Add(boundaryGrace).After(now) && !at.After(until); at = at.Add(time.Minute) {
		r.trans.judge(at, scheduleTargets)
	}
}

// settle waits, after the last kill, until the schedule's current boundary
// is done and every pod runs or waits with a reason, at most o.Settle.
func (r *runner) settle(ctx context.Context) {
	logger := klog.FromContext(ctx)
	deadline := time.Now().Add(r.o.Settle)
	for {
		why := r.unsettled()
		if why == "" {
			logger.Info("Settled")
			return
		}
		if time.Now().After(deadline) {
			r.tally.violated(InvBoundaryTerminal, "not settled %v after the last kill: %s", r.o.Settle, why)
			return
		}
		if sleep(ctx, time.Second) != nil {
			return
		}
	}
}

func (r *runner) unsettled() string {
	now := time.Now()
	current := now.Truncate(time.Minute)
	if current.After(r.scheduleApplied) {
		for _, t := range scheduleTargets {
			if !r.trans.reached(t, current) {
				return fmt.Sprintf("target %s has not finished the boundary at %s", t, current.UTC().Format(time.TimeOnly))
			}
		}
	}
	pods, err := r.c.Watch.Pods.List(labels.Everything())
	if err != nil {
		return err.Error()
	}
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
			return "pod " + p.Namespace + "/" + p.Name + " terminating"
		case p.Spec.NodeName == "" && !hasReason(p):
			return "pod " + p.Namespace + "/" + p.Name + " not placed"
		case p.Spec.NodeName != "" && !podReady(p):
			return "pod " + p.Namespace + "/" + p.Name + " not ready"
		}
	}
	for _, n := range r.nodes {
		claims, _, calls := n.kubelet.Claims()
		if calls > 0 {
			return "node " + n.spec.Name + ": a plugin call in flight"
		}
		for _, c := range claims {
			if !c.Prepared {
				return "node " + n.spec.Name + ": claim " + c.Namespace + "/" + c.Name + " not prepared"
			}
		}
	}
	return ""
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// teardown removes the workload: the schedule, every pod (the Deployments
// scaled to zero: no garbage collector runs here), then the reservation,
// and waits until nothing of it is left on the nodes or in the API.
func (r *runner) teardown(ctx context.Context) {
	logger := klog.FromContext(ctx)
	err := r.c.Dynamic.Resource(rotav1.DeploySchedulesResource).Namespace(reservationNamespace).Delete(ctx, scheduleName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "Deleting the schedule")
	}
	deploys, err := r.c.Client.AppsV1().Deployments(reservationNamespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, d := range deploys.Items {
			patch := []byte(`{"spec":{"replicas":0}}`)
			if _, err := r.c.Client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				logger.Error(err, "Scaling down", "deployment", d.Name)
			}
		}
	}
	if err := r.c.Client.CoreV1().Pods(churnNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		logger.Error(err, "Deleting the churn pods")
	}
	r.waitFor(ctx, "every pod gone", func() bool {
		for _, ns := range []string{reservationNamespace, churnNamespace} {
			pods, err := r.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) > 0 {
				return false
			}
		}
		return true
	})
	r.collectGarbage(ctx)
	err = r.c.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(reservationNamespace).Delete(ctx, "serving", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "Deleting the reservation")
	}
	r.waitFor(ctx, "nothing left", func() bool {
		r.collectGarbage(ctx)
		return len(r.leftovers(ctx)) == 0
	})
}

// collectGarbage deletes the claims generated for pods that are gone, as
// kube-controller-manager's garbage collector does (the claims' owner is
// their pod); no garbage collector runs in the sandbox.
func (r *runner) collectGarbage(ctx context.Context) {
	claims, err := r.claimsLive(ctx)
	if err != nil {
		return
	}
	for _, c := range claims {
		for _, ref := range c.OwnerReferences {
			if ref.Kind != "Pod" {
				continue
			}
			_, err := r.c.Client.CoreV1().Pods(c.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				continue
			}
			err = r.c.Client.ResourceV1().ResourceClaims(c.Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				klog.FromContext(ctx).Error(err, "Deleting the claim of a removed pod", "claim", klog.KObj(&c))
			}
		}
	}
}

func (r *runner) waitFor(ctx context.Context, what string, done func() bool) {
	deadline := time.Now().Add(r.o.Settle)
	for !done() {
		if time.Now().After(deadline) {
			klog.FromContext(ctx).Info("Gave up waiting", "for", what, "after", r.o.Settle)
			return
		}
		if sleep(ctx, 500*time.Millisecond) != nil {
			return
		}
	}
}

// leftovers is what the teardown should have removed and did not.
func (r *runner) leftovers(ctx context.Context) []string {
	var out []string
	claims, err := r.claimsLive(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	for _, c := range claims {
		what := "claim"
		if c.Labels[gpuv1.ReservationNameLabel] != "" {
			what = "holder claim"
		}
		out = append(out, fmt.Sprintf("%s %s/%s", what, c.Namespace, c.Name))
	}
	_, err = r.c.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(reservationNamespace).Get(ctx, "serving", metav1.GetOptions{})
	if err == nil {
		out = append(out, "reservation "+reservationNamespace+"/serving")
	}
	for _, n := range r.nodes {
		cp, err := n.checkpoint()
		if err != nil {
			out = append(out, fmt.Sprintf("node %s: checkpoint: %v", n.spec.Name, err))
			continue
		}
		for uid, c := range cp.Claims {
			out = append(out, fmt.Sprintf("node %s: checkpoint still holds %s/%s (%s)", n.spec.Name, c.Namespace, c.Name, uid))
		}
		specs, err := n.cdiClaims()
		if err != nil {
			out = append(out, fmt.Sprintf("node %s: CDI specs: %v", n.spec.Name, err))
		}
		for _, uid := range specs {
			out = append(out, fmt.Sprintf("node %s: CDI spec of claim %s", n.spec.Name, uid))
		}
	}
	slices.Sort(out)
	return out
}

// checkOrphans: every CDI spec on a node belongs to a claim the checkpoint
// holds prepared and the other way round, and every holder claim belongs to
// a reservation that exists. After the teardown (final), nothing at all is
// left.
func (r *runner) checkOrphans(ctx context.Context, final bool) {
	if final {
		r.tally.checked(InvNoOrphans, 1)
		for _, l := range r.leftovers(ctx) {
			r.tally.violated(InvNoOrphans, "after the teardown: %s", l)
		}
		return
	}
	for _, n := range r.nodes {
		cp, err := n.checkpoint()
		if err != nil {
			continue
		}
		specs, err := n.cdiClaims()
		if err != nil {
			continue
		}
		r.tally.checked(InvNoOrphans, 1)
		for _, uid := range specs {
			if c, ok := cp.Claims[uid]; !ok || c.State != checkpoint.PrepareCompleted {
				r.tally.violated(InvNoOrphans, "node %s: CDI spec of claim %s, which the checkpoint does not hold prepared", n.spec.Name, uid)
			}
		}
		for uid, c := range cp.Claims {
			if c.State == checkpoint.PrepareCompleted && !slices.Contains(specs, uid) {
				r.tally.violated(InvNoOrphans, "node %s: claim %s/%s (%s) prepared without its CDI spec", n.spec.Name, c.Namespace, c.Name, uid)
			}
		}
	}
	claims, err := r.claimsLive(ctx)
	if err != nil {
		return
	}
	for _, c := range claims {
		name := c.Labels[gpuv1.ReservationNameLabel]
		if name == "" {
			continue
		}
		r.tally.checked(InvNoOrphans, 1)
		ns := c.Labels[gpuv1.ReservationNamespaceLabel]
		if _, err := r.c.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			r.tally.violated(InvNoOrphans, "holder claim %s/%s of reservation %s/%s, which is gone", c.Namespace, c.Name, ns, name)
		}
	}
}
