package tiering

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

func TestTierSummaryString(t *testing.T) {
	s := tierSummary{label: "tier 1/2 h100", nodes: 12, reasons: map[string]int{
		"tainted gpu.rota.dev/unhealthy": 3, reasonNoFreeDevice: 9,
	}}
	want := "tier 1/2 h100: 0 of 12 nodes — 9 no free device, 3 tainted gpu.rota.dev/unhealthy"
	if diff := cmp.Diff(want, s.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestPostFilterExplains runs a failed cycle and checks the message users
// read in `kubectl describe pod`.
func TestPostFilterExplains(t *testing.T) {
	tests := map[string]struct {
		slices []*resourceapi.ResourceSlice
		used   []*resourceapi.ResourceClaim
		count  int64
		want   string
	}{
		"L4 only: no H100, no A100": {
			slices: []*resourceapi.ResourceSlice{testSlice("node-a", gpus("L4", 24, 2)...)},
			want: `Tiering (policy test-v1): tier 1/2 h100: 0 of 1 nodes — 1 no H100; ` +
				`tier 2/2 a100: 0 of 1 nodes — 1 no A100`,
		},
		"tainted H100 and a node without GPUs": {
			slices: []*resourceapi.ResourceSlice{
				testSlice("node-a", gpu{model: "H100", memGiB: 80, tainted: true}),
				testSlice("node-b"),
			},
			want: `Tiering (policy test-v1): tier 1/2 h100: 0 of 2 nodes — 1 no free device (no devices published), 1 tainted gpu.rota.dev/unhealthy; ` +
				`tier 2/2 a100: 0 of 2 nodes — 1 no A100, 1 no free device (no devices published)`,
		},
		"the only H100 is held by another namespace's reservation, which is not named": {
			slices: []*resourceapi.ResourceSlice{testSlice("node-a", gpu{model: "H100", memGiB: 80, reservedBy: "team-a.llm"})},
			want: `Tiering (policy test-v1): tier 1/2 h100: 0 of 1 nodes — 1 reserved by a GPUReservation of another namespace; ` +
				`tier 2/2 a100: 0 of 1 nodes — 1 no A100`,
		},
		"two H100s asked, one free: a shortfall, not an empty node": {
			slices: []*resourceapi.ResourceSlice{testSlice("node-a", gpus("H100", 80, 2)...)},
			used:   []*resourceapi.ResourceClaim{allocatedClaim("busy", "node-a", "gpu-0")},
			count:  2,
			want: `Tiering (policy test-v1): tier 1/2 h100: 0 of 1 nodes — 1 too few free devices (2 needed); ` +
				`tier 2/2 a100: 0 of 1 nodes — 1 no A100`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var nodes []*v1.Node
			for _, s := range tc.slices {
				nodes = append(nodes, testNode(*s.Spec.NodeName))
			}
			e := newEnv(t, nodes, tc.slices, append(tc.used, tieredClaim("p", max(tc.count, 1), "H100", "A100")))
			pod := testPod("p")
			scores, cs := e.cycle(t, pod)
			if len(scores) != 0 {
				t.Fatalf("feasible nodes %v, want none", scores)
			}
			statuses := framework.NewDefaultNodeToStatus()
			for _, n := range nodes {
				statuses.Set(n.Name, fwk.NewStatus(fwk.Unschedulable, "cannot allocate all claims").WithPlugin("DynamicResources"))
			}
			_, st := e.tiering.PostFilter(e.ctx, cs, pod, statuses)
			if st.Code() != fwk.Unschedulable {
				t.Errorf("code %v, want Unschedulable", st.Code())
			}
			if diff := cmp.Diff(tc.want, st.Message()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}
