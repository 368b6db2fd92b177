package tiering

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

func TestRankScores(t *testing.T) {
	tests := map[string]struct {
		ranks []nodeRank
		want  map[string]int64
	}{
		"better tier wins over fit and name": {
			ranks: []nodeRank{
				{Node: "a", Tier: 1, Stranded: 0, Feasible: true},
				{Node: "z", Tier: 0, Stranded: 7, Feasible: true},
			},
			want: map[string]int64{"z": 100, "a": 99},
		},
		"within a tier the tighter fit wins": {
			ranks: []nodeRank{
				{Node: "a", Tier: 0, Stranded: 7, Feasible: true},
				{Node: "b", Tier: 0, Stranded: 1, Feasible: true},
			},
			want: map[string]int64{"b": 100, "a": 99},
		},
		"equal tier and fit fall back to node name": {
			ranks: []nodeRank{
				{Node: "node-2", Tier: 0, Stranded: 3, Feasible: true},
				{Node: "node-10", Tier: 0, Stranded: 3, Feasible: true},
				{Node: "node-1", Tier: 0, Stranded: 3, Feasible: true},
			},
			want: map[string]int64{"node-1": 100, "node-10": 99, "node-2": 98},
		},
		"infeasible nodes rank last": {
			ranks: []nodeRank{
				{Node: "a", Feasible: false},
				{Node: "b", Tier: 2, Stranded: 9, Feasible: true},
			},
			want: map[string]int64{"b": 100, "a": 99},
		},
		"scores floor at zero past 101 nodes": {
			ranks: manyRanks(103),
			want: func() map[string]int64 {
				m := map[string]int64{}
				for i := range 103 {
					m[fmt.Sprintf("n%03d", i)] = max(100-int64(i), 0)
				}
				return m
			}(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, rankScores(tc.ranks)); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func manyRanks(n int) []nodeRank {
	out := make([]nodeRank, n)
	for i := range out {
		out[n-1-i] = nodeRank{Node: fmt.Sprintf("n%03d", i), Feasible: true}
	}
	return out
}

// TestScoreWithAllocator drives DynamicResources' real allocator through
// the shared DRA manager and checks what Tiering makes of it.
func TestScoreWithAllocator(t *testing.T) {
	tests := map[string]struct {
		slices []*resourceapi.ResourceSlice
		claim  *resourceapi.ResourceClaim
		want   map[string]int64
		ranks  map[string]nodeRank
	}{
		"H100 node beats A100 node that sorts first": {
			slices: []*resourceapi.ResourceSlice{
				testSlice("node-a", gpus("A100", 80, 8)...),
				testSlice("node-b", gpus("H100", 80, 8)...),
			},
			claim: tieredClaim("p", 1, "H100", "A100"),
			want:  map[string]int64{"node-b": 100, "node-a": 99},
			ranks: map[string]nodeRank{
				"node-a": {Node: "node-a", Tier: 1, Stranded: 7, Feasible: true},
				"node-b": {Node: "node-b", Tier: 0, Stranded: 7, Feasible: true},
			},
		},
		"bin-packing prefers the fuller H100 node": {
			slices: []*resourceapi.ResourceSlice{
				testSlice("node-a", gpus("H100", 80, 8)...),
				testSlice("node-b", gpus("H100", 80, 2)...),
			},
			claim: tieredClaim("p", 1, "H100", "A100"),
			want:  map[string]int64{"node-b": 100, "node-a": 99},
			ranks: map[string]nodeRank{
				"node-a": {Node: "node-a", Tier: 0, Stranded: 7, Feasible: true},
				"node-b": {Node: "node-b", Tier: 0, Stranded: 1, Feasible: true},
			},
		},
		"tainted H100s do not count and push the node to A100": {
			slices: []*resourceapi.ResourceSlice{
				testSlice("node-a", gpu{model: "H100", memGiB: 80, tainted: true}, gpu{model: "A100", memGiB: 80}),
				testSlice("node-b", gpus("A100", 80, 1)...),
			},
			claim: tieredClaim("p", 1, "H100", "A100"),
			want:  map[string]int64{"node-a": 100, "node-b": 99},
			ranks: map[string]nodeRank{
				"node-a": {Node: "node-a", Tier: 1, Stranded: 0, Feasible: true},
				"node-b": {Node: "node-b", Tier: 1, Stranded: 0, Feasible: true},
			},
		},
		"two devices per pod need two free on one node": {
			slices: []*resourceapi.ResourceSlice{
				testSlice("node-a", gpus("H100", 80, 1)...),
				testSlice("node-b", gpus("A100", 80, 4)...),
				testSlice("node-c", gpus("H100", 80, 2)...),
			},
			claim: tieredClaim("p", 2, "H100", "A100"),
			want:  map[string]int64{"node-c": 100, "node-b": 99},
			ranks: map[string]nodeRank{
				"node-b": {Node: "node-b", Tier: 1, Stranded: 2, Feasible: true},
				"node-c": {Node: "node-c", Tier: 0, Stranded: 0, Feasible: true},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var nodes []*v1.Node
			for _, s := range tc.slices {
				nodes = append(nodes, testNode(*s.Spec.NodeName))
			}
			e := newEnv(t, nodes, tc.slices, []*resourceapi.ResourceClaim{tc.claim})
			scores, cs := e.cycle(t, testPod("p"))
			if diff := cmp.Diff(tc.want, scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
			st, err := getPreScoreState(cs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.ranks, st.ranks, cmp.AllowUnexported(nodeRank{})); diff != "" {
				t.Errorf("ranks (-want +got):\n%s", diff)
			}
		})
	}
}
