package admission

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
)

// fragmentationCluster sets up the fragmentation scenario (docs/design.md#scenario-fragmentation) at t=0: two nodes with two GPUs
// each; tenant A serves with two replicas (a-1 on n2, a-2 on n1), tenant C
// runs a one-GPU job on n2, and tenant B submits a two-rank gang whose
// ranks share one claim of two GPUs (so both land on the same node, whole
// or not at all). Limits: A 2, B 2, C 1.
func fragmentationCluster(t *testing.T, extra ...any) *framework.ControlPlane {
	t.Helper()
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t,
		framework.Namespace("team-a"), framework.Namespace("team-b"), framework.Namespace("team-c"),
		framework.DeviceClass(),
		framework.Node("n1"), framework.GPUSlice("n1", framework.GPUs(framework.H100, 2)...),
		framework.Node("n2"), framework.GPUSlice("n2", framework.GPUs(framework.H100, 2)...),
	)
	limits := func(ns string, n int) map[string]any {
		return map[string]any{"namespace": ns, "limits": map[string]any{"H100": n}}
	}
	cp.StartSchedulerWithPluginArgs(t, map[string]any{
		"Quota": map[string]any{"tenants": []any{limits("team-a", 2), limits("team-b", 2), limits("team-c", 1)}},
	})
	for _, obj := range extra {
		if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	one := framework.TieredClaimTemplate("team-a", "one-gpu", framework.ModelTier("H100"))
	oneC := framework.TieredClaimTemplate("team-c", "one-gpu", framework.ModelTier("H100"))
	cp.Create(t, one, oneC)
	app := map[string]string{"app": "serving"}
	cp.Create(t, framework.WithLabels(framework.OnNode(framework.GPUPod("team-a", "a-1", sched, "one-gpu"), "n2"), app))
	cp.WaitForPodBound(t, "team-a", "a-1")
	cp.Create(t, framework.WithLabels(framework.OnNode(framework.GPUPod("team-a", "a-2", sched, "one-gpu"), "n1"), app))
	cp.WaitForPodBound(t, "team-a", "a-2")
	cp.Create(t, framework.OnNode(framework.GPUPod("team-c", "c-1", sched, "one-gpu"), "n2"))
	cp.WaitForPodBound(t, "team-c", "c-1")
	cp.Create(t, framework.DeviceClaim("team-b", "ranks", 2))
	cp.Create(t, framework.ClaimPod("team-b", "b-rank-0", sched, "ranks"), framework.ClaimPod("team-b", "b-rank-1", sched, "ranks"))
	return cp
}

// TestFragmentationScenario is the fragmentation scenario (docs/design.md#scenario-fragmentation).
func TestFragmentationScenario(t *testing.T) {
	sim := newSimTime(t)
	cp := fragmentationCluster(t)

	sim.at(0, "one GPU free on n1: B waits for capacity")
	for _, rank := range []string{"b-rank-0", "b-rank-1"} {
		msg := cp.WaitForWaiting(t, "team-b", rank, "InsufficientCapacity", "needs 2 GPUs on one node — H100 1/4 free")
		t.Logf("  %s: InsufficientCapacity: %s", rank, msg)
		// The long form is in the scheduler's message (and kubectl rota why).
		cp.WaitForPodUnschedulable(t, "team-b", rank, "1 free in the pool (n1: 1) of 4 matching")
	}
	cp.AllocatedDevices(t)

	sim.at(10, "C's job ends: one GPU free on each node, B is fragmented")
	cp.DeletePodNow(t, "team-c", "c-1")
	msg := cp.WaitForWaiting(t, "team-b", "b-rank-0", "TopologyFragmentation",
		"needs 2 GPUs on one node — H100 2/4 free (at most 1 per node)")
	t.Logf("  b-rank-0: TopologyFragmentation: %s", msg)
	cp.WaitForPodUnschedulable(t, "team-b", "b-rank-0",
		"2 free in the pool but spread (n1: 1, n2: 1)", "largest free block 1", "preemption would not help")
	cp.AllocatedDevices(t)
	checkKubectlRota(t, cp)

	sim.at(12, "A scales to one replica: its second replica on n1 drains, B's ranks land together on n1")
	cp.DeletePodNow(t, "team-a", "a-2")
	for _, rank := range []string{"b-rank-0", "b-rank-1"} {
		pod := cp.WaitForPodBound(t, "team-b", rank)
		if pod.Spec.NodeName != "n1" {
			t.Fatalf("%s bound to %s, want n1", rank, pod.Spec.NodeName)
		}
	}
	held := cp.AllocatedDevices(t)
	if got := fmt.Sprint(held["n1/gpu-0"], held["n1/gpu-1"]); got != "[team-b/ranks] [team-b/ranks]" {
		t.Fatalf("n1's GPUs held by %s, want both by team-b/ranks", got)
	}
	framework.WaitFor(t, "B's waiting condition to clear", func(context.Context) (bool, string, error) {
		c := waitingCondition(t, cp, "team-b", "b-rank-0")
		if c == nil {
			return false, "no condition", nil
		}
		return c.Status == v1.ConditionFalse && c.Reason == "Placed", fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message), nil
	})

	sim.at(32, "B is done: its GPUs are free again")
	cp.DeletePodNow(t, "team-b", "b-rank-0")
	cp.DeletePodNow(t, "team-b", "b-rank-1")
	framework.WaitFor(t, "B's claim to release its GPUs", func(ctx context.Context) (bool, string, error) {
		c, err := cp.Client.ResourceV1().ResourceClaims("team-b").Get(ctx, "ranks", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return c.Status.Allocation == nil, fmt.Sprintf("allocated=%v reservedFor=%d", c.Status.Allocation != nil, len(c.Status.ReservedFor)), nil
	})
	if held := cp.AllocatedDevices(t); len(held) != 1 {
		t.Fatalf("after B: held %v, want only A's remaining replica", held)
	}
}

// TestFragmentationConstraintConflict is the fragmentation scenario's
// constraint-conflict case (docs/design.md#scenario-fragmentation-constraint-conflict): A must keep two
// replicas across both nodes (a PodDisruptionBudget with minAvailable 2),
// so no placement for B can exist. B is told so, as a constraint conflict
// that the scheduler does not retry as if it might fit.
func TestFragmentationConstraintConflict(t *testing.T) {
	sim := newSimTime(t)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serving"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serving"}},
		},
	}
	cp := fragmentationCluster(t, pdb)

	sim.at(10, "C's job ends; A must keep a replica on each node")
	cp.DeletePodNow(t, "team-c", "c-1")
	msg := cp.WaitForWaiting(t, "team-b", "b-rank-0", "TopologyFragmentation",
		"constraint conflict, no placement exists: needs 2 GPUs on one node")
	t.Logf("  b-rank-0: %s", msg)
	sched := cp.WaitForPodUnschedulable(t, "team-b", "b-rank-0", "constraint conflict", "largest block any node could offer is 1")
	t.Logf("  PodScheduled: %s", sched)
	// The wait detail carries the cause as data, for `kubectl rota why -o
	// json` and other tools.
	framework.WaitFor(t, "b-rank-0's wait detail to name the cause", func(ctx context.Context) (bool, string, error) {
		pod, err := cp.Client.CoreV1().Pods("team-b").Get(ctx, "b-rank-0", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		d, _ := waits.CurrentDetail(pod)
		return d.Cause == waits.CauseConstraintConflict, fmt.Sprintf("cause %q", d.Cause), nil
	})
	cp.AllocatedDevices(t)
}

func ptrTo[T any](v T) *T { return &v }
