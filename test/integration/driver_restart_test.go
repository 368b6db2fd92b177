package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/state"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestDriverKillAndRestartAtEveryPrepareStep kills the plugin after each side
// effect of a prepare, restarts it on the same disk and plays the kubelet's
// retry: the claim then prepares, no second exclusive claim gets its GPU, and
// unprepare leaves nothing behind.
func TestDriverKillAndRestartAtEveryPrepareStep(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeviceClass(), framework.Namespace("ml"))
	n := startGPUNode(t, cp, "node-crash", "l4x2")
	const timeSliced = `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Long"}}}`

	for _, step := range state.Steps {
		t.Run(string(step), func(t *testing.T) {
			name := strings.ToLower(string(step))
			claim := n.allocatedClaim(ctx, "ml", name, timeSliced, "gpu-0")
			rival := n.allocatedClaim(ctx, "ml", name+"-rival", "", "gpu-0")

			n.hook = func(s state.Step) error {
				if s == step {
					return state.ErrCrash
				}
				return nil
			}
			n.restart()
			if _, err := n.prepare(ctx, claim); err == nil {
				t.Fatal("prepare survived the injected crash")
			}
			n.hook = nil
			n.restart()

			recorded, ok := n.checkpointClaims()[string(claim.UID)]
			_, cdiErr := os.Stat(n.cdiPath(claim))
			completed := ok && recorded.State == checkpoint.PrepareCompleted
			if ok && !completed {
				t.Fatalf("claim left %s after restart", recorded.State)
			}
			if completed != (cdiErr == nil) {
				t.Fatalf("checkpoint completed=%v but CDI spec present=%v", completed, cdiErr == nil)
			}
			if completed {
				if _, err := n.prepare(ctx, rival); err == nil {
					t.Fatal("exclusive rival prepared on a GPU the recovered claim holds")
				}
			}

			if _, err := n.prepare(ctx, claim); err != nil {
				t.Fatalf("kubelet retry of prepare: %v", err)
			}
			if _, err := n.prepare(ctx, rival); err == nil || !strings.Contains(err.Error(), "an exclusive claim needs it alone") {
				t.Fatalf("rival prepare while the claim holds gpu-0 = %v", err)
			}
			if err := n.unprepare(ctx, claim); err != nil {
				t.Fatalf("unprepare: %v", err)
			}
			if _, err := os.Stat(n.cdiPath(claim)); !os.IsNotExist(err) {
				t.Errorf("CDI spec left after unprepare: %v", err)
			}
			if _, err := n.prepare(ctx, rival); err != nil {
				t.Errorf("rival after unprepare: %v", err)
			}
			if err := n.unprepare(ctx, rival); err != nil {
				t.Errorf("unprepare rival: %v", err)
			}
			if left := n.checkpointClaims(); len(left) != 0 {
				t.Errorf("checkpoint not empty: %v", left)
			}
		})
	}
}
