package tiering

import (
	"fmt"
	"runtime"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// BenchmarkPruning measures one scheduling cycle of a pod asking "H100
// else A100" over 1,000 nodes of 8 GPUs (a third each H100, A100, L4,
// every GPU free), with tier-aware pruning off and on: DynamicResources'
// and Tiering's PreFilter, Tiering's Filter then DynamicResources' on
// every node it passes (the witness search runs DynamicResources' Filter
// too), Tiering's PreScore and Score on the
// feasible nodes. dra-filters/op counts DynamicResources' Filter calls,
// the witness search's included.
func BenchmarkPruning(b *testing.B) {
	const n = 1000
	nodes, slices := mixedPool(n)
	e := newEnv(b, nodes, slices, []*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100", "A100")})
	pod := testPod("p")
	runtime.GC()
	for _, prune := range []bool{false, true} {
		b.Run(fmt.Sprintf("nodes=%d/pruning=%t", n, prune), func(b *testing.B) {
			visits := 0
			for b.Loop() {
				out := e.pruningCycle(b, pod, prune, nil, nil)
				if out.node != "node-00000" {
					b.Fatalf("chose %q, want node-00000", out.node)
				}
				visits += out.draVisits + out.probes
			}
			b.ReportMetric(float64(visits)/float64(b.N), "dra-filters/op")
		})
	}
}
