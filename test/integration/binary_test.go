package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

func TestSchedulerBinaryBindsPod(t *testing.T) {
	bin := framework.Binary(t, "scheduler")

	version, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, version)
	}
	// The version is stamped by the Makefile's ldflags; a binary this test
	// builds itself carries component-base's placeholder instead.
	if os.Getenv("ROTA_BIN_DIR") != "" {
		if !strings.Contains(string(version), "v1.37") || !strings.Contains(string(version), "+rota.") {
			t.Errorf("--version = %q, want the Kubernetes release it is built on and the Rota build after '+rota.'", version)
		}
	}

	cp := framework.StartControlPlane(t)
	gpuCluster(t, cp, "serving")
	cp.StartClaimController(t)

	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config", cp.SchedulerConfig(t), "--secure-port=0", "-v=2")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("scheduler output:\n%s", logs.String())
		}
	})

	cp.Create(t, framework.GPUPod("serving", "llama", scheduler.ProfileName, "h100-else-a100"))
	pod := cp.WaitForPodBound(t, "serving", "llama")
	if pod.Spec.NodeName != "node-h100" {
		t.Errorf("built scheduler bound the pod to %q, want node-h100", pod.Spec.NodeName)
	}
}
