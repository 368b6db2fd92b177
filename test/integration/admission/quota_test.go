package admission

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestQuotaFallsBackWithinLimit: team-a may hold one H100. Its second
// "H100 else A100" pod is granted an A100 although an H100 is free; its
// "H100 only" pod waits with QuotaExceeded; team-b, unlimited, still gets
// the free H100; once team-a releases its H100, the waiting pod takes it.
func TestQuotaFallsBackWithinLimit(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t,
		framework.Namespace("team-a"), framework.Namespace("team-b"), framework.DeviceClass(),
		framework.Node("nh"), framework.GPUSlice("nh", framework.GPUs(framework.H100, 2)...),
		framework.Node("na"), framework.GPUSlice("na", framework.GPUs(framework.A100, 2)...),
	)
	cp.StartSchedulerWithPluginArgs(t, map[string]any{
		"Quota": map[string]any{"tenants": []any{map[string]any{"namespace": "team-a", "limits": map[string]any{"H100": 1, "A100": 4}}}},
	})
	either := []framework.Tier{framework.ModelTier("H100"), framework.ModelTier("A100")}
	cp.Create(t,
		framework.TieredClaimTemplate("team-a", "h100-else-a100", either...),
		framework.TieredClaimTemplate("team-a", "h100-only", framework.ModelTier("H100")),
		framework.TieredClaimTemplate("team-b", "h100-only", framework.ModelTier("H100")),
	)

	cp.Create(t, framework.GPUPod("team-a", "a-1", sched, "h100-else-a100"))
	if node := cp.WaitForPodBound(t, "team-a", "a-1").Spec.NodeName; node != "nh" {
		t.Fatalf("a-1 on %s, want nh (H100, within the limit)", node)
	}
	cp.Create(t, framework.GPUPod("team-a", "a-2", sched, "h100-else-a100"))
	if node := cp.WaitForPodBound(t, "team-a", "a-2").Spec.NodeName; node != "na" {
		t.Fatalf("a-2 on %s, want na: at its H100 limit team-a falls back to A100", node)
	}
	if tier := cp.WaitForPodAnnotation(t, "team-a", "a-2", "rota.dev/tier"); tier != "2/2: A100" {
		t.Fatalf("a-2 tier %q, want 2/2: A100", tier)
	}

	cp.Create(t, framework.GPUPod("team-a", "a-3", sched, "h100-only"))
	msg := cp.WaitForWaiting(t, "team-a", "a-3", "QuotaExceeded", "team-a holds 1 of 1 H100")
	t.Logf("a-3: QuotaExceeded: %s", msg)

	cp.Create(t, framework.GPUPod("team-b", "b-1", sched, "h100-only"))
	if node := cp.WaitForPodBound(t, "team-b", "b-1").Spec.NodeName; node != "nh" {
		t.Fatalf("b-1 on %s, want nh: team-a's limit must not hold team-b back", node)
	}
	cp.AllocatedDevices(t)

	cp.DeletePodNow(t, "team-a", "a-1")
	if node := cp.WaitForPodBound(t, "team-a", "a-3").Spec.NodeName; node != "nh" {
		t.Fatalf("a-3 on %s, want nh once team-a released its H100", node)
	}
	held := cp.AllocatedDevices(t)
	if len(held) != 3 {
		t.Fatalf("held %v, want 3 GPUs (a-2, a-3, b-1)", held)
	}
	p, err := cp.Client.CoreV1().Pods("team-a").Get(context.Background(), "a-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a-3 placed: %v", p.Status.Conditions)
}
