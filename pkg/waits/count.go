package waits

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// Holders answers what the classifier needs to know about the pods that
// hold devices. Lookups of pods it does not know report ok=false.
type Holders interface {
	// Priority of the pod.
	Priority(pod types.NamespacedName) (priority int32, ok bool)
	// Pinned reports whether the pod must keep running: a
	// PodDisruptionBudget allows no disruption of it.
	Pinned(pod types.NamespacedName) bool
}

// TierLabel names tier i of a request in messages.
func TierLabel(r gpupool.Request, i int) string {
	if !r.Tiered {
		return "request " + r.Name
	}
	return fmt.Sprintf("tier %d/%d %s", i+1, len(r.Tiers), r.Tiers[i].Name)
}

// CountTier counts, node by node, the devices of the pool that tier i of r
// could use, and who holds the others. priority is the waiting pod's.
func CountTier(ctx context.Context, pool *gpupool.Pool, m *gpupool.Matcher, r gpupool.Request, i int, priority int32, holders Holders) TierCounts {
	t := r.Tiers[i]
	tc := TierCounts{
		Label: TierLabel(r, i), Need: int(t.Count),
		Matching: map[string]int{}, Free: map[string]int{}, Tainted: map[string]int{},
		Preemptible: map[string]int{}, Pinned: map[string]int{},
	}
	if t.All {
		tc.Need = 1
	}
	for _, node := range pool.Nodes {
		for _, d := range pool.ByNode[node] {
			if !m.Matches(ctx, d) {
				continue
			}
			tc.Matching[node]++
			switch {
			case d.FreeFor(t) && gpupool.BlockingTaint(d.Device, t.Tolerations) != nil:
				tc.Tainted[node]++
			case d.FreeFor(t):
				tc.Free[node]++
			default:
				classifyHeld(&tc, node, d, priority, holders)
			}
		}
	}
	return tc
}

// classifyHeld counts an allocated device as pinned (some holder must keep
// running) or preemptible (every holder has lower priority).
func classifyHeld(tc *TierCounts, node string, d *gpupool.Device, priority int32, holders Holders) {
	if holders == nil || len(d.Holders) == 0 {
		return
	}
	lower := true
	for _, h := range d.Holders {
		if holders.Pinned(h) {
			tc.Pinned[node]++
			return
		}
		if p, ok := holders.Priority(h); !ok || p >= priority {
			lower = false
		}
	}
	if lower {
		tc.Preemptible[node]++
	}
}
