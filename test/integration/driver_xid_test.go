package integration

import (
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestDriverApplicationXIDTaintIsInformational: an application XID (13, a
// graphics engine exception caused by the workload) shows in the published
// slice as an informational taint, effect None, for --xid-hold-time, and is
// gone after it, without the fault being cleared (the probe passes all along).
func TestDriverApplicationXIDTaintIsInformational(t *testing.T) {
	const hold = 3 * time.Second
	cp := framework.StartControlPlane(t)
	n := startGPUNode(t, cp, "node-xid", "l4x2", func(g *gpuNode) { g.opts.XIDHoldTime = hold })
	n.waitForTaints(t, "the slice without taints", func(m map[string][]resourceapi.DeviceTaint) bool { return len(m) == 0 })

	injected := time.Now()
	n.setFaults("1 13\n")
	isInformational := func(m map[string][]resourceapi.DeviceTaint) bool {
		ts := m["gpu-1"]
		return len(m) == 1 && len(ts) == 1 && ts[0].Key == "gpu.rota.dev/unhealthy" &&
			ts[0].Value == "xid-13" && ts[0].Effect == resourceapi.DeviceTaintEffectNone
	}
	took := n.waitForTaints(t, "an effect None taint xid-13 on gpu-1", isInformational)
	t.Logf("informational taint published %v after the XID", took)

	// Still there well within the hold time.
	time.Sleep(hold / 3)
	s, err := n.slice(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if taints := taintsOf(s); !isInformational(taints) {
		t.Fatalf("%v after the XID (hold %v): taints %v, want the effect None taint still", time.Since(injected), hold, taints)
	}

	n.waitForTaints(t, "the taint to clear after the hold time", func(m map[string][]resourceapi.DeviceTaint) bool { return len(m) == 0 })
	cleared := time.Since(injected)
	t.Logf("taint cleared %v after the XID (hold %v)", cleared, hold)
	if cleared < hold {
		t.Errorf("taint cleared after %v, before the hold time %v ran out", cleared, hold)
	}
}
