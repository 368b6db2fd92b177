package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// fairCluster is four H100s on two nodes, a one-GPU template in tenant-x
// and tenant-y, and Rota's scheduler with the given Fairness args.
func fairCluster(t *testing.T, fairness map[string]any) *framework.ControlPlane {
	t.Helper()
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t,
		framework.Namespace("tenant-x"), framework.Namespace("tenant-y"), framework.DeviceClass(),
		framework.Node("n1"), framework.GPUSlice("n1", framework.GPUs(framework.H100, 2)...),
		framework.Node("n2"), framework.GPUSlice("n2", framework.GPUs(framework.H100, 2)...),
		framework.TieredClaimTemplate("tenant-x", "one-gpu", framework.ModelTier("H100")),
		framework.TieredClaimTemplate("tenant-y", "one-gpu", framework.ModelTier("H100")),
	)
	cp.StartSchedulerWithPluginArgs(t, map[string]any{"Fairness": fairness})
	return cp
}

// TestWeightedShare: tenant-x has weight 3, tenant-y weight 1, and both
// keep more one-GPU pods pending than the pool of four GPUs holds. Each
// time a GPU frees up (the longest-running pod ends) the next placement
// is made; over 40 placements tenant-x holds three of the four GPUs on
// average, within ±0.4 GPU (docs/admission.md, "Fair queue order").
func TestWeightedShare(t *testing.T) {
	const perTenant, gpus, placements, warmup = 60, 4, 40, 4
	cp := fairCluster(t, map[string]any{"defaultWeight": 1, "ageing": "5m",
		"tenants": []any{map[string]any{"namespace": "tenant-x", "weight": 3}}})
	for i := range perTenant {
		cp.Create(t, framework.GPUPod("tenant-x", fmt.Sprintf("x-%03d", i), sched, "one-gpu"),
			framework.GPUPod("tenant-y", fmt.Sprintf("y-%03d", i), sched, "one-gpu"))
	}
	running := waitBound(t, cp, gpus, nil)
	held := func() (x int) {
		for _, p := range running {
			if p.Namespace == "tenant-x" {
				x++
			}
		}
		return x
	}
	var samples []int
	for range placements {
		oldest := running[0]
		running = running[1:]
		cp.DeletePodNow(t, oldest.Namespace, oldest.Name)
		running = append(running, waitBound(t, cp, 1, running)...)
		samples = append(samples, held())
	}
	sum := 0
	for _, s := range samples[warmup:] {
		sum += s
	}
	mean := float64(sum) / float64(len(samples)-warmup)
	t.Logf("GPUs tenant-x held after each placement: %v; mean after %d placements of warm-up: %.2f of %d (weights 3:1 → 3.00)", samples, warmup, mean, gpus)
	if mean < 2.6 || mean > 3.4 {
		t.Errorf("tenant-x held %.2f of %d GPUs on average, want 3 ± 0.4 (weights 3:1)", mean, gpus)
	}
}

// TestAgeingLiftsStarvedTenant: with equal weights, tenant-x holds three of
// the four GPUs and waits for a fourth, while tenant-y, holding the other
// one, always has a fresh pod pending when its pod ends. By share alone
// tenant-y's pod comes first every time; ageing (2s per weighted GPU here)
// lifts tenant-x's pod once it is older than tenant-y's fresh pod by
// ageing × the difference of shares, and it takes the next GPU freed after
// that (docs/admission.md: the bound, and the creation times' one-second
// resolution).
//
// The difference is 3 (3 GPUs against 0 once tenant-y's pod ended), or 2
// while the scheduler's claim informer has not yet seen that pod's claim
// go: so the wait is at least ageing × 2 whatever the informer's lag (with
// 2 GPUs against 2, a lag made the shares equal and let the older pod in at
// once), and at most ageing × 3 plus the time for one more GPU to free up.
func TestAgeingLiftsStarvedTenant(t *testing.T) {
	const ageing = 2 * time.Second
	cp := fairCluster(t, map[string]any{"defaultWeight": 1, "ageing": ageing.String()})
	cp.Create(t, framework.GPUPod("tenant-x", "x-hold-0", sched, "one-gpu"), framework.GPUPod("tenant-x", "x-hold-1", sched, "one-gpu"),
		framework.GPUPod("tenant-x", "x-hold-2", sched, "one-gpu"), framework.GPUPod("tenant-y", "y-000", sched, "one-gpu"))
	running := waitBound(t, cp, 4, nil)
	var xs, ys []*v1.Pod
	for _, p := range running {
		if p.Namespace == "tenant-y" {
			ys = append(ys, p)
		} else {
			xs = append(xs, p)
		}
	}
	ctx := context.Background()
	starved := framework.GPUPod("tenant-x", "x-wait", sched, "one-gpu")
	cp.Create(t, starved)
	created, err := cp.Client.CoreV1().Pods("tenant-x").Get(ctx, starved.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := created.CreationTimestamp.Time
	yPlaced := 0
	var waited time.Duration
	for i := 1; waited == 0 && i < 200; i++ {
		// A fresh tenant-y pod, with its claim, is pending before tenant-y's
		// GPU frees up. Without its claim it could not fit, and a fairer
		// pod that does not fit never holds the GPU back from x-wait.
		fresh := framework.GPUPod("tenant-y", fmt.Sprintf("y-%03d", i), sched, "one-gpu")
		cp.Create(t, fresh)
		waitClaimCreated(t, cp, fresh)
		oldest := ys[0]
		ys = ys[1:]
		cp.DeletePodNow(t, oldest.Namespace, oldest.Name)
		next := waitBound(t, cp, 1, append(append([]*v1.Pod{}, xs...), ys...))
		for _, p := range next {
			if p.Namespace == "tenant-x" {
				waited = boundAt(t, cp, p).Sub(start)
				continue
			}
			ys = append(ys, p)
			yPlaced++
		}
	}
	t.Logf("x-wait placed after %s, %d tenant-y pods placed before it (ageing %s × share difference 2 to 3)", waited, yPlaced, ageing)
	if waited == 0 {
		t.Fatalf("x-wait was never placed; %d tenant-y pods were", yPlaced)
	}
	if yPlaced == 0 {
		t.Errorf("no tenant-y pod was placed while x-wait waited: the test did not starve it")
	}
	// Creation times have a resolution of one second, hence the second below.
	if low, high := 2*ageing-time.Second, 3*ageing+8*time.Second; waited < low || waited > high {
		t.Errorf("x-wait placed after %s, want between %s and %s (ageing × 2 to 3 weighted GPUs, then the next GPU freed)", waited, low, high)
	}
}

// waitClaimCreated waits until the claim controller made pod's claim from
// its template.
func waitClaimCreated(t *testing.T, cp *framework.ControlPlane, pod *v1.Pod) {
	t.Helper()
	framework.WaitFor(t, "claim of "+pod.Name, func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.ResourceClaimName == nil {
				continue
			}
			if _, err := cp.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *st.ResourceClaimName, metav1.GetOptions{}); err == nil {
				return true, "", nil
			}
		}
		return false, "no claim yet", nil
	})
}

// boundAt is when the pod's PodScheduled condition turned True.
func boundAt(t *testing.T, cp *framework.ControlPlane, pod *v1.Pod) time.Time {
	t.Helper()
	p, err := cp.Client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	t.Fatalf("pod %s has no PodScheduled=True", pod.Name)
	return time.Time{}
}
