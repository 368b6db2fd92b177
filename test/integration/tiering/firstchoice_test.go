package tiering

import (
	"testing"

	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestFirstChoiceMetric (#40, policy accuracy): rota_tiering_first_choice_
// placements_total counts each placed tiered request by the model of its
// first tier, the model granted and whether that was the first tier. One H100 and one A100; three pods
// asking "H100 else A100" take the H100 (first choice granted), then the
// A100 (fell back from H100); the third waits and counts nothing.
func TestFirstChoiceMetric(t *testing.T) {
	cp := framework.StartControlPlane(t)
	const ns = "accuracy"
	cp.Create(t,
		framework.DeviceClass(),
		framework.Node("node-h100"), framework.GPUSlice("node-h100", framework.H100),
		framework.Node("node-a100"), framework.GPUSlice("node-a100", framework.A100),
		framework.Namespace(ns),
		framework.TieredClaimTemplate(ns, "h100-else-a100", framework.ModelTier("H100"), framework.ModelTier("A100")),
	)
	cp.StartClaimController(t)
	cp.StartScheduler(t)
	hit, miss := firstChoice(t, "H100", "H100", "first"), firstChoice(t, "H100", "A100", "fallback")

	cp.Create(t, framework.GPUPod(ns, "first", scheduler.ProfileName, "h100-else-a100"))
	if p := cp.WaitForPodBound(t, ns, "first"); p.Spec.NodeName != "node-h100" {
		t.Fatalf("first pod on %s, want node-h100", p.Spec.NodeName)
	}
	cp.Create(t, framework.GPUPod(ns, "second", scheduler.ProfileName, "h100-else-a100"))
	if p := cp.WaitForPodBound(t, ns, "second"); p.Spec.NodeName != "node-a100" {
		t.Fatalf("second pod on %s, want node-a100", p.Spec.NodeName)
	}
	cp.Create(t, framework.GPUPod(ns, "third", scheduler.ProfileName, "h100-else-a100"))
	cp.WaitForPodUnschedulable(t, ns, "third")

	if got := firstChoice(t, "H100", "H100", "first") - hit; got != 1 {
		t.Errorf("first_choice=H100 granted=H100 outcome=first grew by %v, want 1", got)
	}
	if got := firstChoice(t, "H100", "A100", "fallback") - miss; got != 1 {
		t.Errorf("first_choice=H100 granted=A100 outcome=fallback grew by %v, want 1", got)
	}
}

// firstChoice reads rota_tiering_first_choice_placements_total from the
// in-process scheduler's registry.
func firstChoice(t *testing.T, first, granted, outcome string) float64 {
	t.Helper()
	return metricValue(t, "rota_tiering_first_choice_placements_total", map[string]string{"first_choice": first, "granted": granted, "outcome": outcome})
}
