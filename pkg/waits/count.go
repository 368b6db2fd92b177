package waits

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
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
		Reserved: map[string]int{}, Reservations: map[string]int{},
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
			// A GPU that only a reservation the claim does not tolerate
			// keeps it off counts as reserved, whether its members use it
			// now or not: they are not what keeps the pod off. A reserved
			// GPU that is also unhealthy counts as unhealthy.
			other, reservedBy := gpupool.Blocked(d.Device, t.Tolerations)
			switch {
			case other == nil && reservedBy != "":
				tc.Reserved[node]++
				tc.Reservations[reservationName(reservedBy)]++
			case !d.FreeFor(t):
				classifyHeld(&tc, node, d, priority, holders)
			case other != nil:
				tc.Tainted[node]++
			default:
				tc.Free[node]++
			}
		}
	}
	return tc
}

// reservationName renders a reserved taint's value "<namespace>.<name>" as
// "namespace/name", the way kubectl names the GPUReservation.
func reservationName(value string) string {
	if ns, name, ok := gpuv1.ParseReservedTaintValue(value); ok {
		return ns + "/" + name
	}
	return value
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
