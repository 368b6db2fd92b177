package admission

import (
	"context"
	"fmt"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestFairQueueOrder: tenant X floods the queue with 200 one-GPU pods on a
// pool of four GPUs; tenant Y, with equal weight, submits 10 pods later.
// Each time a GPU frees up (the longest-running pod ends) the next
// placement is recorded. Y's pods must not queue behind X's backlog: each
// is placed within a bounded number of placements, counted from Y's
// submission — not after X's 196 waiting pods.
func TestFairQueueOrder(t *testing.T) {
	const flood, later, gpus = 200, 10, 4
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t,
		framework.Namespace("tenant-x"), framework.Namespace("tenant-y"), framework.DeviceClass(),
		framework.Node("n1"), framework.GPUSlice("n1", framework.GPUs(framework.H100, 2)...),
		framework.Node("n2"), framework.GPUSlice("n2", framework.GPUs(framework.H100, 2)...),
		framework.TieredClaimTemplate("tenant-x", "one-gpu", framework.ModelTier("H100")),
		framework.TieredClaimTemplate("tenant-y", "one-gpu", framework.ModelTier("H100")),
	)
	cp.StartScheduler(t)
	for i := range flood {
		cp.Create(t, framework.GPUPod("tenant-x", fmt.Sprintf("x-%03d", i), sched, "one-gpu"))
	}
	running := waitBound(t, cp, gpus, nil)
	for i := range later {
		cp.Create(t, framework.GPUPod("tenant-y", fmt.Sprintf("y-%02d", i), sched, "one-gpu"))
	}
	// Y's pods must have been seen waiting before capacity frees up.
	cp.WaitForWaiting(t, "tenant-y", "y-09", "InsufficientCapacity")

	var order []string // namespaces of placements after Y's submission
	placedAt := map[string]int{}
	for len(placedAt) < later && len(order) < 60 {
		// The longest-running pod ends; one GPU frees up.
		oldest := running[0]
		running = running[1:]
		cp.DeletePodNow(t, oldest.Namespace, oldest.Name)
		next := waitBound(t, cp, 1, running)
		running = append(running, next...)
		for _, p := range next {
			order = append(order, p.Namespace)
			if p.Namespace == "tenant-y" {
				placedAt[p.Name] = len(order)
			}
		}
		cp.AllocatedDevices(t)
	}
	t.Logf("placements after Y's submission: %v", order)
	t.Logf("Y's pods placed at placement number: %v", placedAt)
	if len(placedAt) < later {
		t.Fatalf("only %d of Y's %d pods placed within %d placements", len(placedAt), later, len(order))
	}
	// With equal weights Y reaches half the pool, then alternates with X:
	// its last pod is placed within 2 placements per pod plus the two it
	// takes while X still holds more. FIFO order would need 196 + 10.
	maxWait := 0
	for _, n := range placedAt {
		maxWait = max(maxWait, n)
	}
	if bound := 2*later + 2; maxWait > bound {
		t.Fatalf("Y's last pod placed at placement %d, want ≤ %d", maxWait, bound)
	}
	t.Logf("Y's maximum wait: %d placements (bound %d; FIFO: %d)", maxWait, 2*later+2, flood-gpus+later)
}

// waitBound waits until n pods beyond known are bound and returns them,
// oldest binding first (by name within one poll).
func waitBound(t *testing.T, cp *framework.ControlPlane, n int, known []*v1.Pod) []*v1.Pod {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range known {
		seen[p.Namespace+"/"+p.Name] = true
	}
	var fresh []*v1.Pod
	framework.WaitFor(t, fmt.Sprintf("%d more pods bound", n), func(ctx context.Context) (bool, string, error) {
		fresh = fresh[:0]
		for _, ns := range []string{"tenant-x", "tenant-y"} {
			pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !seen[p.Namespace+"/"+p.Name] {
					fresh = append(fresh, p)
				}
			}
		}
		return len(fresh) >= n, fmt.Sprintf("%d new bound pods", len(fresh)), nil
	})
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].Name < fresh[j].Name })
	return fresh
}
