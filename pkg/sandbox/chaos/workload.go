package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	rotav1alpha1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/scheduler"
)

// The reservation part of the mix is the H200 reservation scenario's
// (docs/design.md#scenario-h200-reservation, examples/scenarios/
// reservation-h200): GPUReservation team-a/serving holds one H200 of h200-0,
// time-sliced, for members A, B, C and D; a DeploySchedule swaps A and B.
// Its windows flip every minute of real time (the components are separate
// processes and cannot share a virtual clock).
const (
	reservationNamespace = "team-a"
	reservationNode      = "h200-0"
	scheduleName         = "shifts"
	// boundaryGrace is how long after a window boundary both targets must
	// have reached a terminal phase for it; the next boundary is a minute
	// later.
	boundaryGrace  = 50 * time.Second
	churnNamespace = "ml"
	churnTemplate  = "h100-else-a100"
	maxChurnPods   = 20
)

var scheduleTargets = []string{"a", "b"}

// scheduleYAML swaps A and B every minute: A runs in the even minutes of
// UTC (the window), B in the odd ones (the default).
var scheduleYAML = "apiVersion: " + rotav1alpha1.SchemeGroupVersion.String() + `
kind: DeploySchedule
metadata:
  name: ` + scheduleName + `
  namespace: ` + reservationNamespace + `
spec:
  timeZone: UTC
  mode: Enforce
  transitionOrder: ReleaseFirst
  targets:
  - name: a
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-a}
    defaultState: Stopped
  - name: b
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-b}
    defaultState: Running
  windows:
  - name: a-shift
    priority: 10
    recurring: {cron: "*/2 * * * *", duration: 1m}
    states:
    - {target: a, desiredState: Running}
    - {target: b, desiredState: Stopped}
`

// applyWorkloads creates the reservation with its members, the schedule and
// the fallback churn's claim template.
func (r *runner) applyWorkloads(ctx context.Context) error {
	dir := filepath.Join(r.o.RepoRoot, "examples", "scenarios")
	for _, f := range []string{"reservation-h200/reservation.yaml", "reservation-h200/workloads.yaml", "fallback/claimtemplate.yaml"} {
		if err := r.c.Applier.ApplyFile(ctx, filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	if err := r.c.Applier.ApplyYAML(ctx, []byte(scheduleYAML)); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	r.scheduleApplied = time.Now()
	// D once B and C had a chance to be placed (the scenario's order).
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
	}
	if err := r.c.Applier.ApplyFile(ctx, filepath.Join(dir, "reservation-h200/member-d.yaml")); err != nil {
		return fmt.Errorf("member-d: %w", err)
	}
	return nil
}

func churnPod(i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: churnNamespace, Name: fmt.Sprintf("churn-%05d", i)},
		Spec: v1.PodSpec{
			SchedulerName:                 scheduler.ProfileName,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			ResourceClaims:                []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(churnTemplate)}},
			Containers: []v1.Container{{Name: "train", Image: "registry.example/train:1.0",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
}

// churn creates fallback pods (an H100, else an A100) at random moments and
// deletes each after its random lifetime, until ctx ends.
func (r *runner) churn(ctx context.Context) {
	logger := klog.FromContext(ctx)
	rnd := churnRand(r.o.Seed)
	type alive struct {
		name string
		ends time.Time
	}
	var pods []alive
	next := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			kept := pods[:0]
			for _, p := range pods {
				if now.Before(p.ends) {
					kept = append(kept, p)
					continue
				}
				err := r.c.Client.CoreV1().Pods(churnNamespace).Delete(ctx, p.name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					if ctx.Err() != nil {
						return
					}
					logger.Error(err, "Deleting a churn pod", "pod", p.name)
				}
				r.stats.add(&r.stats.podsDeleted, 1)
			}
			pods = kept
			if now.Before(next) || len(pods) >= maxChurnPods {
				continue
			}
			next = now.Add(between(rnd, 200*time.Millisecond, 1500*time.Millisecond))
			life := between(rnd, 3*time.Second, 25*time.Second)
			i++
			if _, err := r.c.Client.CoreV1().Pods(churnNamespace).Create(ctx, churnPod(i), metav1.CreateOptions{}); err != nil {
				if ctx.Err() != nil {
					return
				}
				logger.Error(err, "Creating a churn pod")
				continue
			}
			r.stats.add(&r.stats.podsCreated, 1)
			pods = append(pods, alive{name: churnPod(i).Name, ends: now.Add(life)})
		}
	}
}

// faults raises GPU faults (XID 79: fallen off the bus; XID 48: double-bit
// ECC) on the churn nodes through the mock's fault file and recovers them
// after a while, until ctx ends; then it recovers every GPU.
func (r *runner) faults(ctx context.Context) {
	rnd := faultRand(r.o.Seed)
	var targets []*node
	for _, n := range r.nodes {
		if n.spec.Name != reservationNode {
			targets = append(targets, n)
		}
	}
	if len(targets) == 0 {
		return
	}
	type active struct {
		n     *node
		index int
		ends  time.Time
	}
	var on []active
	next := time.Now().Add(between(rnd, 2*time.Second, 8*time.Second))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			for _, a := range on {
				r.recover(ctx, a.n, a.index)
			}
			return
		case now = <-tick.C:
		}
		kept := on[:0]
		for _, a := range on {
			if now.Before(a.ends) {
				kept = append(kept, a)
				continue
			}
			r.recover(ctx, a.n, a.index)
		}
		on = kept
		if now.Before(next) {
			continue
		}
		next = now.Add(between(rnd, 3*time.Second, 10*time.Second))
		n := targets[rnd.IntN(len(targets))]
		index := rnd.IntN(n.gpus)
		xid := []uint64{79, 48}[rnd.IntN(2)]
		down := between(rnd, 2*time.Second, 8*time.Second)
		busy := false
		for _, a := range on {
			busy = busy || (a.n == n && a.index == index)
		}
		if busy {
			continue
		}
		if err := n.setFault(index, xid); err != nil {
			klog.FromContext(ctx).Error(err, "Raising a GPU fault", "node", n.spec.Name)
			continue
		}
		r.stats.add(&r.stats.faults, 1)
		on = append(on, active{n: n, index: index, ends: now.Add(down)})
	}
}

func (r *runner) recover(ctx context.Context, n *node, index int) {
	if err := n.setFault(index, 0); err != nil {
		klog.FromContext(ctx).Error(err, "Recovering a GPU", "node", n.spec.Name)
		return
	}
	r.stats.add(&r.stats.recoveries, 1)
}
