package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// sibling starts a second plugin instance for n's node on the same
// directories and checkpoint, as the new pod of a DaemonSet rolling update
// with maxSurge: 1 does.
func (n *gpuNode) sibling(podUID string) *gpuNode {
	n.t.Helper()
	s := &gpuNode{t: n.t, cp: n.cp, name: n.name, opts: n.opts}
	s.opts.PodUID = podUID
	s.start()
	n.t.Cleanup(s.stop)
	return s
}

// TestDriverRollingUpdate runs an old and a new plugin instance for one node
// at once. The kubelet (the test) talks to both; each sees what the other
// prepared (no double prepare, no lost claim); when the old one stops, its
// sockets go away and the new one unprepares everything, including claims
// the old one prepared after the new one started.
func TestDriverRollingUpdate(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeviceClass(), framework.Namespace("ml"))
	old := startGPUNode(t, cp, "node-roll", "dgx-h100", func(g *gpuNode) { g.opts.PodUID = "old-pod-uid" })
	x := old.allocatedClaim(ctx, "ml", "x", "", "gpu-0")
	if _, err := old.prepare(ctx, x); err != nil {
		t.Fatalf("old instance: prepare x: %v", err)
	}

	upd := old.sibling("new-pod-uid")
	for _, inst := range []*gpuNode{old, upd} {
		info, err := inst.getInfo(ctx)
		if err != nil {
			t.Fatalf("GetInfo %s: %v", inst.opts.PodUID, err)
		}
		if info.Endpoint != inst.draSocket() {
			t.Errorf("instance %s registers endpoint %s, want its own %s", inst.opts.PodUID, info.Endpoint, inst.draSocket())
		}
	}
	if old.regSocket() == upd.regSocket() || old.draSocket() == upd.draSocket() {
		t.Fatalf("both instances use the same sockets: %s %s", old.regSocket(), old.draSocket())
	}

	y := old.allocatedClaim(ctx, "ml", "y", "", "gpu-1")
	if _, err := upd.prepare(ctx, y); err != nil {
		t.Fatalf("new instance: prepare y: %v", err)
	}
	// The old instance, still up, prepares after the new one wrote y.
	z := old.allocatedClaim(ctx, "ml", "z", "", "gpu-2")
	if _, err := old.prepare(ctx, z); err != nil {
		t.Fatalf("old instance: prepare z: %v", err)
	}
	rival := old.allocatedClaim(ctx, "ml", "rival", "", "gpu-1")
	if _, err := old.prepare(ctx, rival); err == nil || !strings.Contains(err.Error(), "already prepared exclusively for claim ml/y") {
		t.Fatalf("old instance prepared gpu-1 that the new instance gave to y: %v", err)
	}
	if _, err := upd.prepare(ctx, x); err != nil {
		t.Fatalf("new instance: repeat prepare of x from the old one: %v", err)
	}
	if got := len(upd.checkpointClaims()); got != 3 {
		t.Fatalf("checkpoint holds %d claims, want x, y, z: %v", got, upd.checkpointClaims())
	}

	old.stop() // graceful: SIGTERM in the DaemonSet
	for _, sock := range []string{old.draSocket(), old.regSocket()} {
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("old instance's socket %s left after it stopped: %v", sock, err)
		}
	}
	if _, err := upd.getInfo(ctx); err != nil {
		t.Fatalf("new instance after the old one stopped: GetInfo: %v", err)
	}
	if _, err := upd.slice(ctx); err != nil {
		t.Errorf("slice after the old instance stopped: %v", err)
	}
	for _, claim := range []*resourceapi.ResourceClaim{x, y, z} {
		if err := upd.unprepare(ctx, claim); err != nil {
			t.Errorf("new instance: unprepare %s: %v", claim.Name, err)
		}
		if _, err := os.Stat(upd.cdiPath(claim)); !os.IsNotExist(err) {
			t.Errorf("CDI spec of %s left: %v", claim.Name, err)
		}
	}
	if left := upd.checkpointClaims(); len(left) != 0 {
		t.Errorf("checkpoint not empty: %v", left)
	}
	if _, err := upd.prepare(ctx, rival); err != nil {
		t.Errorf("new instance: rival after y was unprepared: %v", err)
	}
}
