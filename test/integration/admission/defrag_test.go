package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/defrag"
	"github.com/rota-dev/rota/test/integration/framework"
)

// defragCluster is the fragmentation scenario at t=10 with team-a's budget "serving" at
// minAvailable 1 and the real disruption controller keeping its status:
// a-1 (n2) and a-2 (n1) run, one GPU is free on each node, B's 2-GPU gang
// waits fragmented. ready says which of A's replicas report Ready (the
// test acts as their kubelet). A decoy pod named like A's replica on n1,
// with A's labels, runs in team-c: defrag must never touch it.
func defragCluster(t *testing.T, ready map[string]bool) *framework.ControlPlane {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serving"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serving"}},
		},
	}
	cp := fragmentationCluster(t, pdb)
	cp.StartDisruptionController(t)
	for _, name := range []string{"a-1", "a-2"} {
		setRunning(t, cp, "team-a", name, ready[name])
	}
	cp.DeletePodNow(t, "team-c", "c-1")
	cp.WaitForWaiting(t, "team-b", "b-rank-0", "TopologyFragmentation")
	decoy := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "a-2", Labels: map[string]string{"app": "serving"}},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	cp.Create(t, decoy)
	want := int32(0)
	if ready["a-1"] && ready["a-2"] {
		want = 1
	}
	framework.WaitFor(t, "team-a/serving's status from the disruption controller", func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.PolicyV1().PodDisruptionBudgets("team-a").Get(ctx, "serving", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		s := p.Status
		return s.ObservedGeneration == p.Generation && s.ExpectedPods == 2 && s.DisruptionsAllowed == want,
			fmt.Sprintf("observed %d/%d expected %d healthy %d allowed %d", s.ObservedGeneration, p.Generation, s.ExpectedPods, s.CurrentHealthy, s.DisruptionsAllowed), nil
	})
	return cp
}

// setRunning reports the pod Running, Ready or not, as its kubelet would.
func setRunning(t *testing.T, cp *framework.ControlPlane, ns, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: status, LastTransitionTime: metav1.Now()})
	if _, err := cp.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status of %s/%s: %v", ns, name, err)
	}
}

// runKubectlRotaErr runs `kubectl rota args...` and returns its output and
// exit error.
func runKubectlRotaErr(t *testing.T, cp *framework.ControlPlane, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(framework.Binary(t, "kubectl-rota"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// untouched fails the test unless each pod exists and is not terminating.
func untouched(t *testing.T, cp *framework.ControlPlane, pods ...string) {
	t.Helper()
	for _, pk := range pods {
		ns, name, _ := strings.Cut(pk, "/")
		p, err := cp.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s: err %v, terminating %v; want it untouched", pk, err, err == nil && p.DeletionTimestamp != nil)
		}
	}
}

// TestDefrag: the plan names the drain of A's replica on n1 for B's gang,
// with its cost and the budget it uses; a server-side dry run evicts
// nothing; --apply evicts exactly that pod (not the decoy named like it in
// team-c), and B's ranks then land together on n1.
func TestDefrag(t *testing.T) {
	cp := defragCluster(t, map[string]bool{"a-1": true, "a-2": true})

	// The session of docs/user-guide.md: why B waits, then the plan.
	framework.WaitFor(t, "b-rank-0's advice to name the drain of team-a/a-2", func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods("team-b").Get(ctx, "b-rank-0", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		a := p.Annotations[gpuv1.AdviceAnnotation]
		return strings.Contains(a, "evict team-a/a-2"), a, nil
	})
	why := runKubectlRota(t, cp, "why", "-n", "team-b", "b-rank-0")
	t.Logf("kubectl rota why -n team-b b-rank-0:\n%s", why)
	if !strings.Contains(why, "To admit: move: evict team-a/a-2 (1 × H100) on n1") {
		t.Errorf("why: no advice naming the drain of team-a/a-2")
	}
	plan := runKubectlRota(t, cp, "defrag", "--plan", "-A")
	t.Logf("kubectl rota defrag --plan -A:\n%s", plan)
	for _, want := range []string{
		"1 waiting: 1 admitted by moves, 0 fit without one, 0 blocked; 1 pod to evict",
		"1. team-b/b-rank-0 (team-b/b-rank-0, team-b/b-rank-1; priority 0): move → lands on n1 (2 × H100)",
		"cost: 1 GPU disturbed, highest priority 0, 1 tenant",
		"1.1 evict team-a/a-2 (1 × H100) on n1 (nodeSelector kubernetes.io/hostname=n1); uses PodDisruptionBudget team-a/serving allows 1",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan: missing %q", want)
		}
	}
	var p defrag.Plan
	if err := json.Unmarshal([]byte(runKubectlRota(t, cp, "defrag", "-A", "-o", "json")), &p); err != nil {
		t.Fatalf("defrag -o json: %v", err)
	}
	if len(p.Evictions) != 1 || p.Evictions[0].Pod != "team-a/a-2" || p.Evictions[0].Node != "n1" || p.Evictions[0].Unit != "team-b/b-rank-0" {
		t.Fatalf("defrag -o json: evictions %+v, want team-a/a-2 on n1 for team-b/b-rank-0", p.Evictions)
	}
	if out := runKubectlRota(t, cp, "defrag", "-n", "team-a"); !strings.HasPrefix(out, "Nothing waiting") {
		t.Errorf("defrag -n team-a: %q, want nothing waiting there", out)
	}

	dry := runKubectlRota(t, cp, "defrag", "-A", "--dry-run=server")
	t.Logf("kubectl rota defrag -A --dry-run=server:\n%s", dry)
	if !strings.Contains(dry, "step 1/1: evict team-a/a-2 for team-b/b-rank-0: accepted by the API server (dry run, nothing evicted)") ||
		!strings.Contains(dry, "nothing was evicted") {
		t.Errorf("dry run: no accepted step for team-a/a-2")
	}
	untouched(t, cp, "team-a/a-1", "team-a/a-2", "team-c/a-2")

	// --apply waits for the evicted pod to go; the test is its kubelet and
	// removes it once it is terminating.
	var out bytes.Buffer
	approved := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(approved, []byte(runKubectlRota(t, cp, "defrag", "-A", "-o", "json")), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(framework.Binary(t, "kubectl-rota"), "--kubeconfig", cp.Kubeconfig, "defrag", "-A", "--apply", "--approved", approved, "--timeout", "1m")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "team-a/a-2 to be evicted (terminating)", func(ctx context.Context) (bool, string, error) {
		pod, err := cp.Client.CoreV1().Pods("team-a").Get(ctx, "a-2", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return pod.DeletionTimestamp != nil, "not terminating", nil
	})
	cp.DeletePodNow(t, "team-a", "a-2")
	err := cmd.Wait()
	t.Logf("kubectl rota defrag -A --apply:\n%s", out.String())
	if err != nil {
		t.Fatalf("defrag --apply: %v", err)
	}
	if !strings.Contains(out.String(), "step 1/1: evict team-a/a-2 for team-b/b-rank-0: evicted") ||
		!strings.Contains(out.String(), "re-planned: the rest of the plan holds (0 steps left)") {
		t.Errorf("apply: no evicted step with a re-plan")
	}
	for _, rank := range []string{"b-rank-0", "b-rank-1"} {
		if pod := cp.WaitForPodBound(t, "team-b", rank); pod.Spec.NodeName != "n1" {
			t.Errorf("%s bound to %s, want n1", rank, pod.Spec.NodeName)
		}
	}
	untouched(t, cp, "team-a/a-1", "team-c/a-2")
	if out := runKubectlRota(t, cp, "defrag", "-A", "--apply"); !strings.HasPrefix(out, "Nothing waiting") {
		t.Errorf("defrag --apply with nothing waiting: %q", out)
	}
}

// TestDefragStopsAtBudget: a-1 is not Ready, so the disruption controller
// lets team-a/serving allow no disruption while the advisor (which counts
// running replicas, not ready ones) plans A's replica on n1. The API
// server refuses the eviction; the dry run says so and --apply stops at
// that step naming the budget, evicting nothing.
func TestDefragStopsAtBudget(t *testing.T) {
	cp := defragCluster(t, map[string]bool{"a-1": false, "a-2": true})
	if plan := runKubectlRota(t, cp, "defrag", "-A"); !strings.Contains(plan, "1.1 evict team-a/a-2") {
		t.Fatalf("plan:\n%s\nwant the eviction of team-a/a-2", plan)
	}
	dry, err := runKubectlRotaErr(t, cp, "defrag", "-A", "--dry-run=server")
	t.Logf("kubectl rota defrag -A --dry-run=server:\n%s", dry)
	if err == nil || !strings.Contains(dry, "step 1/1: evict team-a/a-2 for team-b/b-rank-0: would be refused") ||
		!strings.Contains(dry, "error: dry run: the API server would refuse 1 of 1 steps (step 1 (team-a/a-2), see above); nothing was evicted") {
		t.Errorf("dry run: exit %v, want a refused step", err)
	}
	out, err := runKubectlRotaErr(t, cp, "defrag", "-A", "--apply", "--timeout", "30s")
	t.Logf("kubectl rota defrag -A --apply:\n%s", out)
	for _, want := range []string{"error: stopped at step 1 of 1 (team-a/a-2)", "429", "The disruption budget serving needs 1 healthy pods and has 1 currently",
		"planned with PodDisruptionBudget team-a/serving allows 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply: missing %q", want)
		}
	}
	if err == nil {
		t.Error("apply exited 0 after a refused eviction")
	}
	untouched(t, cp, "team-a/a-1", "team-a/a-2", "team-c/a-2")
	cp.WaitForWaiting(t, "team-b", "b-rank-0", "TopologyFragmentation")
}

// TestDefragStopsWhenThePlanChanges: two gangs, two planned evictions.
// While the first evicted replica terminates, the second planned replica
// ends on its own; the re-plan after step 1 no longer needs step 2, so
// --apply stops there and says the plan changed, evicting nothing more.
func TestDefragStopsWhenThePlanChanges(t *testing.T) {
	cp := threeNodeCluster(t)
	plan := runKubectlRota(t, cp, "defrag", "-A")
	t.Logf("kubectl rota defrag -A:\n%s", plan)
	for _, want := range []string{"1.1 evict team-a/a-1 (1 × H100) on n1", "2. team-d/d-0", "2.1 evict team-a/a-2 (1 × H100) on n2"} {
		if !strings.Contains(plan, want) {
			t.Fatalf("plan: missing %q", want)
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(framework.Binary(t, "kubectl-rota"), "--kubeconfig", cp.Kubeconfig, "defrag", "-A", "--apply", "--timeout", "1m")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "team-a/a-1 to be evicted (terminating)", func(ctx context.Context) (bool, string, error) {
		pod, err := cp.Client.CoreV1().Pods("team-a").Get(ctx, "a-1", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return pod.DeletionTimestamp != nil, "not terminating", nil
	})
	cp.DeletePodNow(t, "team-a", "a-2") // ends on its own
	cp.DeletePodNow(t, "team-a", "a-1") // the kubelet confirms the eviction
	err := cmd.Wait()
	t.Logf("kubectl rota defrag -A --apply:\n%s", out.String())
	if err == nil || !strings.Contains(out.String(), "error: stopped at step 1 of 2 (team-a/a-1): the plan changed after this step: the rest was [team-d/d-0 ← team-a/a-2], a new plan says []") {
		t.Errorf("apply: exit %v, want a stop at step 1 because the plan changed", err)
	}
	untouched(t, cp, "team-a/a-3")
	cp.WaitForPodBound(t, "team-b", "b-rank-0")
	cp.WaitForPodBound(t, "team-d", "d-0")
}

// threeNodeCluster: three nodes of 2 H100, one pinned replica of team-a on
// each, no budget; team-b's 2-rank gang, then team-d's 2-GPU pod, wait.
func threeNodeCluster(t *testing.T) *framework.ControlPlane {
	t.Helper()
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t, framework.Namespace("team-a"), framework.Namespace("team-b"), framework.Namespace("team-d"), framework.DeviceClass())
	for _, n := range []string{"n1", "n2", "n3"} {
		cp.Create(t, framework.Node(n), framework.GPUSlice(n, framework.GPUs(framework.H100, 2)...))
	}
	cp.StartScheduler(t)
	cp.Create(t, framework.TieredClaimTemplate("team-a", "one-gpu", framework.ModelTier("H100")))
	for i, n := range []string{"n1", "n2", "n3"} {
		name := fmt.Sprintf("a-%d", i+1)
		cp.Create(t, framework.OnNode(framework.GPUPod("team-a", name, sched, "one-gpu"), n))
		cp.WaitForPodBound(t, "team-a", name)
	}
	cp.Create(t, framework.DeviceClaim("team-b", "ranks", 2))
	cp.Create(t, framework.ClaimPod("team-b", "b-rank-0", sched, "ranks"), framework.ClaimPod("team-b", "b-rank-1", sched, "ranks"))
	cp.WaitForWaiting(t, "team-b", "b-rank-0", "TopologyFragmentation")
	cp.Create(t, framework.DeviceClaim("team-d", "job", 2))
	cp.Create(t, framework.ClaimPod("team-d", "d-0", sched, "job"))
	cp.WaitForWaiting(t, "team-d", "d-0", "TopologyFragmentation")

	return cp
}

// TestDefragApprovedPlan: the operator approves a plan; a tenant then
// submits a 2-GPU pod of its own, which a fresh plan would admit by
// evicting team-a's third replica. --apply with --approved evicts nothing,
// so a tenant cannot slip an eviction of another namespace's pod into a
// reviewed plan.
func TestDefragApprovedPlan(t *testing.T) {
	cp := threeNodeCluster(t)
	approved := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(approved, []byte(runKubectlRota(t, cp, "defrag", "-A", "-o", "json")), 0o600); err != nil {
		t.Fatal(err)
	}
	cp.Create(t, framework.Namespace("team-x"), framework.DeviceClaim("team-x", "grab", 2), framework.ClaimPod("team-x", "x-0", sched, "grab"))
	cp.WaitForWaiting(t, "team-x", "x-0", "TopologyFragmentation")
	if plan := runKubectlRota(t, cp, "defrag", "-A"); !strings.Contains(plan, "3.1 evict team-a/a-3") {
		t.Fatalf("plan:\n%s\nwant team-x's pod admitted by evicting team-a/a-3", plan)
	}
	for _, mode := range []string{"--apply", "--dry-run=server"} {
		out, err := runKubectlRotaErr(t, cp, "defrag", "-A", mode, "--approved", approved)
		t.Logf("kubectl rota defrag -A %s --approved plan.json:\n%s", mode, out)
		if err == nil || !strings.Contains(out, "error: the cluster's plan is not the approved plan") ||
			!strings.Contains(out, "team-x/x-0 ← team-a/a-3") {
			t.Errorf("%s --approved: exit %v, want a refusal naming the new eviction", mode, err)
		}
	}
	untouched(t, cp, "team-a/a-1", "team-a/a-2", "team-a/a-3")
}
