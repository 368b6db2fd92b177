package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drahealth "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

// taintsOf returns device name → taints in the node's slice.
func taintsOf(s *resourceapi.ResourceSlice) map[string][]resourceapi.DeviceTaint {
	out := map[string][]resourceapi.DeviceTaint{}
	for _, d := range s.Spec.Devices {
		if len(d.Taints) > 0 {
			out[d.Name] = d.Taints
		}
	}
	return out
}

// waitForTaints polls the slice until check accepts its taints and returns
// how long that took.
func (n *gpuNode) waitForTaints(t *testing.T, what string, check func(map[string][]resourceapi.DeviceTaint) bool) time.Duration {
	t.Helper()
	start := time.Now()
	framework.WaitFor(t, what, func(ctx context.Context) (bool, string, error) {
		s, err := n.slice(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		taints := taintsOf(s)
		return check(taints), fmt.Sprintf("taints %v", taints), nil
	})
	return time.Since(start)
}

func TestDriverFaultTaintsGPUAndSchedulerAvoidsIt(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeviceClass(), framework.Namespace("ml"),
		framework.TieredClaimTemplate("ml", "l4", framework.ModelTier("L4")))
	n := startGPUNode(t, cp, "node-l4", "l4x2", func(n *gpuNode) { n.opts.MetricsAddress = "127.0.0.1:0" })
	n.waitForTaints(t, "the slice without taints", func(m map[string][]resourceapi.DeviceTaint) bool { return len(m) == 0 })
	cp.StartClaimController(t)
	cp.StartScheduler(t)

	// GPU 0 falls off the bus.
	n.setFaults("0 79\n")
	took := n.waitForTaints(t, "a NoSchedule taint on gpu-0", func(m map[string][]resourceapi.DeviceTaint) bool {
		ts := m["gpu-0"]
		return len(m) == 1 && len(ts) == 1 && ts[0].Key == "gpu.rota.dev/unhealthy" &&
			ts[0].Effect == resourceapi.DeviceTaintEffectNoSchedule && ts[0].Value == "gpu-lost"
	})
	t.Logf("taint published %v after the fault", took)
	// The change is counted: a signal for alerts, beside the taint.
	if _, body := httpGet(t, n.plugin.MetricsAddr, "/metrics"); !strings.Contains(body, `rota_driver_device_health_changes_total{from="Healthy",reason="gpu-lost",to="Unhealthy"} 1`) {
		t.Errorf("/metrics lacks the health change:\n%s", grepLines(body, "rota_driver_device_health"))
	}
	if took > time.Second {
		t.Errorf("taint took %v to appear, want under 1s", took)
	}

	// A new pod gets the healthy GPU.
	cp.Create(t, framework.GPUPod("ml", "first", scheduler.ProfileName, "l4"))
	pod := cp.WaitForPodBound(t, "ml", "first")
	if got := cp.PodClaim(t, pod, "gpu").Status.Allocation.Devices.Results[0].Device; got != "gpu-1" {
		t.Fatalf("first pod got %s, want the healthy gpu-1", got)
	}
	// The next one has only the tainted GPU left: it waits.
	cp.Create(t, framework.GPUPod("ml", "second", scheduler.ProfileName, "l4"))
	time.Sleep(time.Second)
	second, err := cp.Client.CoreV1().Pods("ml").Get(ctx, "second", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if second.Spec.NodeName != "" {
		t.Fatalf("second pod bound to %s while the only free GPU is tainted", second.Spec.NodeName)
	}
	waiting := ""
	for _, c := range second.Status.Conditions {
		if c.Type == v1.PodScheduled {
			waiting = c.Reason + ": " + c.Message
		}
	}
	t.Logf("second pod waits: %s", waiting)
	if !strings.Contains(waiting, "gpu.rota.dev/unhealthy") {
		t.Errorf("the waiting pod's condition does not name the taint: %q", waiting)
	}

	// Recovery clears the taint and the waiting pod gets gpu-0.
	n.setFaults("")
	took = n.waitForTaints(t, "the taint to clear", func(m map[string][]resourceapi.DeviceTaint) bool { return len(m) == 0 })
	t.Logf("taint cleared %v after recovery", took)
	pod = cp.WaitForPodBound(t, "ml", "second")
	if got := cp.PodClaim(t, pod, "gpu").Status.Allocation.Devices.Results[0].Device; got != "gpu-0" {
		t.Errorf("second pod got %s after recovery, want gpu-0", got)
	}
	// Application XIDs (taint effect None): TestDriverApplicationXIDTaintIsInformational.
}

// TestDriverHealthStreamAndTaintsWithoutScheduler checks the two health
// outputs on their own: the kubelet's health stream over the plugin's socket
// and the taint in the slice, for a fault and its recovery.
func TestDriverHealthStreamAndTaintsWithoutScheduler(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp := framework.StartControlPlane(t)
	n := startGPUNode(t, cp, "node-health", "l4x2")
	n.waitForTaints(t, "the slice without taints", func(m map[string][]resourceapi.DeviceTaint) bool { return len(m) == 0 })

	client := drahealth.NewDRAResourceHealthClient(n.dial(filepath.Join(n.opts.PluginDataDir, "dra.sock")))
	stream, err := client.NodeWatchResources(ctx, &drahealth.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatalf("NodeWatchResources: %v", err)
	}
	// next returns the health of gpu-1 in the next report.
	next := func() drahealth.HealthStatus {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("health stream: %v", err)
		}
		for _, d := range resp.Devices {
			if d.Device.GetPoolName() == "node-health" && d.Device.GetDeviceName() == "gpu-1" {
				return d.Health
			}
		}
		t.Fatalf("report without gpu-1: %v", resp)
		return 0
	}
	if h := next(); h != drahealth.HealthStatus_HEALTHY {
		t.Fatalf("initial gpu-1 health %v", h)
	}

	n.setFaults("1 79\n")
	took := n.waitForTaints(t, "a NoSchedule taint on gpu-1", func(m map[string][]resourceapi.DeviceTaint) bool {
		return len(m["gpu-1"]) == 1 && m["gpu-1"][0].Effect == resourceapi.DeviceTaintEffectNoSchedule
	})
	if took > time.Second {
		t.Errorf("taint took %v, want under 1s", took)
	}
	waitHealth(t, next, drahealth.HealthStatus_UNHEALTHY)

	n.setFaults("")
	n.waitForTaints(t, "the taint to clear", func(m map[string][]resourceapi.DeviceTaint) bool { return len(m) == 0 })
	waitHealth(t, next, drahealth.HealthStatus_HEALTHY)
}

// waitHealth reads reports until one says want; the stream's context bounds it.
func waitHealth(t *testing.T, next func() drahealth.HealthStatus, want drahealth.HealthStatus) {
	t.Helper()
	for {
		if next() == want {
			return
		}
	}
}

// grepLines returns the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
