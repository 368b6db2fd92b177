package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

// gpuCluster creates an A100 node and an H100 node with eight GPUs each, the
// gpu.rota.dev DeviceClass, a namespace and an "H100 else A100" template.
// The A100 node sorts first, so node order alone cannot explain an H100 choice.
func gpuCluster(t *testing.T, cp *framework.ControlPlane, namespace string) {
	t.Helper()
	cp.Create(t,
		framework.DeviceClass(),
		framework.Node("node-a100"), framework.GPUSlice("node-a100", framework.GPUs(framework.A100, 8)...),
		framework.Node("node-h100"), framework.GPUSlice("node-h100", framework.GPUs(framework.H100, 8)...),
		framework.Namespace(namespace),
		framework.TieredClaimTemplate(namespace, "h100-else-a100",
			framework.ModelTier("H100"), framework.ModelTier("A100")),
	)
}

func TestRotaProfileBindsTieredClaimOnH100(t *testing.T) {
	cp := framework.StartControlPlane(t)
	gpuCluster(t, cp, "serving")
	cp.StartClaimController(t)
	cp.StartScheduler(t)

	// A pod for another scheduler first: Rota must leave it alone.
	cp.Create(t, framework.GPUPod("serving", "other", v1.DefaultSchedulerName, "h100-else-a100"))
	cp.Create(t, framework.GPUPod("serving", "llama", scheduler.ProfileName, "h100-else-a100"))

	pod := cp.WaitForPodBound(t, "serving", "llama")
	if pod.Spec.NodeName != "node-h100" {
		t.Errorf("pod bound to %q, want node-h100", pod.Spec.NodeName)
	}
	claim := cp.PodClaim(t, pod, "gpu")
	results := claim.Status.Allocation.Devices.Results
	if len(results) != 1 {
		t.Fatalf("claim %s has %d allocated devices, want 1: %+v", claim.Name, len(results), results)
	}
	got := results[0]
	if got.Request != "gpu/h100" || got.Pool != "node-h100" || got.Driver != gpuv1.DriverName || !strings.HasPrefix(got.Device, "gpu-") {
		t.Errorf("allocated %s/%s/%s for request %q, want a gpu-N of pool node-h100 for request gpu/h100",
			got.Driver, got.Pool, got.Device, got.Request)
	}

	// By now Rota has handled every pod it owns; give it a moment more to
	// misbehave, then check it never touched the other scheduler's pod.
	time.Sleep(500 * time.Millisecond)
	other, err := cp.Client.CoreV1().Pods("serving").Get(context.Background(), "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if other.Spec.NodeName != "" || len(other.Status.Conditions) != 0 {
		t.Errorf("pod for %s was handled by Rota: node=%q conditions=%+v",
			v1.DefaultSchedulerName, other.Spec.NodeName, other.Status.Conditions)
	}
}
