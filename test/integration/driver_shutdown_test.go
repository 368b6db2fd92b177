package integration

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestDriverGracefulShutdownOnSIGTERM runs the real binary against the test's
// API server, prepares a claim, keeps the kubelet busy with prepares and
// unprepares, and sends SIGTERM: the process exits 0 within a few seconds,
// its sockets are gone (the kubelet's cue to unregister it), the checkpoint
// loads and holds only completed claims whose CDI specs exist, and a
// restarted plugin unprepares the claim prepared before the shutdown.
func TestDriverGracefulShutdownOnSIGTERM(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeviceClass(), framework.Namespace("ml"))
	// The first plugin is the binary; the in-process one is the restart.
	n := startGPUNode(t, cp, "node-term", "l4x2", func(g *gpuNode) { g.external = true })

	proc := startPluginProcess(t, n, 2, "", "--shutdown-timeout", "10s", "-v=2")

	before := n.allocatedClaim(ctx, "ml", "before", "", "gpu-0")
	if _, err := n.prepare(ctx, before); err != nil {
		t.Fatalf("prepare before shutdown: %v", err)
	}
	// The kubelet keeps calling while the signal arrives.
	busy := n.allocatedClaim(ctx, "ml", "busy", `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Long"}}}`, "gpu-1")
	stopBusy := make(chan struct{})
	busyDone := make(chan int)
	go func() {
		calls := 0
		for {
			select {
			case <-stopBusy:
				busyDone <- calls
				return
			default:
			}
			if _, err := n.prepare(ctx, busy); err == nil {
				calls++
			}
			if err := n.unprepare(ctx, busy); err == nil {
				calls++
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)

	sent := time.Now()
	if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-proc.exited:
		proc.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("plugin exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("plugin still running 15s after SIGTERM")
	}
	took := time.Since(sent)
	close(stopBusy)
	t.Logf("exit 0 %v after SIGTERM; %d successful kubelet calls before", took, <-busyDone)
	if took > 5*time.Second {
		t.Errorf("shutdown took %v, want a few seconds at most", took)
	}
	for _, sock := range []string{n.draSocket(), n.regSocket()} {
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("socket %s left after shutdown: %v", sock, err)
		}
	}

	// The checkpoint is loadable and consistent with the CDI specs on disk.
	claims := n.checkpointClaims()
	for uid, c := range claims {
		if c.State != checkpoint.PrepareCompleted {
			t.Errorf("claim %s/%s left %s by a graceful shutdown", c.Namespace, c.Name, c.State)
		}
		if _, err := os.Stat(filepath.Join(n.opts.CDIRoot, "k8s.gpu.rota.dev-claim_"+uid+".json")); err != nil {
			t.Errorf("claim %s completed but its CDI spec is missing: %v", c.Name, err)
		}
	}
	if _, ok := claims[string(before.UID)]; !ok {
		t.Fatalf("claim prepared before the shutdown is not in the checkpoint: %v", claims)
	}
	specs, _ := filepath.Glob(filepath.Join(n.opts.CDIRoot, "*.json"))
	if len(specs) != len(claims) {
		t.Errorf("%d CDI specs on disk for %d checkpointed claims: %v", len(specs), len(claims), specs)
	}

	// A restarted plugin unprepares what the old process prepared.
	n.stop()
	n.start()
	for _, c := range claims {
		claim := before
		if c.UID != string(before.UID) {
			claim = busy
		}
		if err := n.unprepare(ctx, claim); err != nil {
			t.Errorf("restarted plugin: unprepare %s: %v", c.Name, err)
		}
	}
	if left := n.checkpointClaims(); len(left) != 0 {
		t.Errorf("checkpoint not empty after unprepare: %v", left)
	}
	if _, err := os.Stat(n.cdiPath(before)); !os.IsNotExist(err) {
		t.Errorf("CDI spec of the claim prepared before the shutdown left: %v", err)
	}
}
