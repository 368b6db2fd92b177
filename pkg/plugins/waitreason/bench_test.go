package waitreason

import (
	"fmt"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/waits"
)

// BenchmarkPostFilter is WaitReason's work in a failed cycle of a pod that
// waits for capacity (newWorld: every H100 and A100 held, a third of the
// nodes L4), at 1,000 and 5,000 nodes × 8 GPUs:
//   - counted: something changed since the pod's last attempt, so its
//     devices are counted again, from its candidates (the H100 and A100
//     nodes) in the cycle's inventory;
//   - reused: nothing changed, the last verdict is reused;
//   - whole-pool: what the count cost before (a pool built with every
//     claim, every device's selectors evaluated), for comparison.
//
// Each cycle reads the node statuses (the framework's own per-node map)
// and a new cycle's inventory, as the scheduler does.
func BenchmarkPostFilter(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		w := newWorld(b, nodes)
		w.attempt(b)
		b.Run(fmt.Sprintf("counted/nodes=%d", nodes), func(b *testing.B) {
			for b.Loop() {
				w.pl.changes.Add(1)
				w.attempt(b)
			}
		})
		b.Run(fmt.Sprintf("reused/nodes=%d", nodes), func(b *testing.B) {
			w.attempt(b)
			for b.Loop() {
				w.attempt(b)
			}
		})
		b.Run(fmt.Sprintf("whole-pool/nodes=%d", nodes), func(b *testing.B) {
			requests, err := gpupool.PodRequests(w.pl.dra, w.pod)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				pool, err := gpupool.CycleSnapshot(b.Context(), framework.NewCycleState(), w.pl.dra, &w.pl.caches.Slices)
				if err != nil {
					b.Fatal(err)
				}
				holders := newHolderInfo(w.pl.pods, w.pl.pdbs)
				for _, r := range requests {
					for i := range r.Tiers {
						m, err := gpupool.NewMatcher(w.pl.dra.DeviceClasses(), w.pl.caches.CEL, w.pl.caches.Matches, r.Tiers[i])
						if err != nil {
							b.Fatal(err)
						}
						waits.CountTier(b.Context(), pool, m, r, i, 0, w.pod.Namespace, holders)
					}
				}
			}
		})
	}
}
