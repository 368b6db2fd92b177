package waits

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

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
// could use, and who holds the others. priority and namespace are the
// waiting pod's: reservations of other namespaces are counted under
// OtherNamespaces, not by name, since what the counts say is shown to the
// pod's owner. It evaluates the tier's selectors on every device of the
// pool; the scheduler counts from a cycle's inventory (CountCandidates).
func CountTier(ctx context.Context, pool *gpupool.Pool, m *gpupool.Matcher, r gpupool.Request, i int, priority int32, namespace string, holders Holders) TierCounts {
	tc := newTierCounts(r, i)
	t := r.Tiers[i]
	var rejected []rejectedDevice
	models := map[string]bool{}
	for _, node := range pool.Nodes {
		for _, d := range pool.ByNode[node] {
			model := gpupool.StringAttribute(d.Device, d.ID.Driver.String(), gpuv1.AttributeModel)
			if failing, err := m.FirstFailing(ctx, d.ID.Driver.String(), d.Device); err != nil || failing != "" {
				if err == nil && !strings.HasPrefix(failing, gpupool.ClassSelectorPrefix) {
					rejected = append(rejected, rejectedDevice{model: model, selector: failing})
				}
				continue
			}
			if model != "" && len(models) == 0 {
				tc.Name = model
			}
			models[model] = true
			tc.add(node, d, t, priority, namespace, holders, func() []types.NamespacedName { return d.Holders })
		}
	}
	tc.countRejected(rejected, models)
	return tc
}

// HolderIndex names the pods that hold an allocated device: the pods its
// claims are reserved for.
type HolderIndex interface {
	HoldersOf(id structured.DeviceID) []types.NamespacedName
}

// CountCandidates is CountTier for the scheduler: it counts tier i of r
// from a cycle's inventory, visiting only the devices cands (the tier's
// candidates in inv's slices) says match, and asks held who holds a
// device only for an allocated one, when holders needs to know.
func CountCandidates(inv *gpupool.Inventory, cands *Candidates, r gpupool.Request, i int, priority int32, namespace string, holders Holders, held HolderIndex) TierCounts {
	tc := newTierCounts(r, i)
	t := r.Tiers[i]
	if cands.name != "" {
		tc.Name = cands.name
	}
	for _, node := range cands.Nodes {
		for _, nd := range cands.ByNode[node] {
			d := inv.DeviceOf(node, nd)
			tc.add(node, &d, t, priority, namespace, holders, func() []types.NamespacedName { return held.HoldersOf(nd.ID) })
		}
	}
	tc.OtherModel = cands.otherModel
	if len(cands.unmet) > 0 {
		tc.Unmet = maps.Clone(cands.unmet)
	}
	return tc
}

// newTierCounts is tier i of r with nothing counted yet.
func newTierCounts(r gpupool.Request, i int) TierCounts {
	t := r.Tiers[i]
	tc := TierCounts{
		Label: TierLabel(r, i), Need: int(t.Count), Request: r.Name, Name: t.Name,
		Matching: map[string]int{}, Free: map[string]int{}, Tainted: map[string]int{},
		Reserved: map[string]int{}, Reservations: map[string]int{},
		Preemptible: map[string]int{}, Pinned: map[string]int{},
	}
	if t.All {
		tc.Need = 1
	}
	if r.Tiered {
		tc.Tier = fmt.Sprintf("%d/%d", i+1, len(r.Tiers))
	}
	return tc
}

// add counts d, a device of node that tier t's selectors accept.
// holdersOf names the pods holding it, asked only when it is allocated
// and holders is set.
func (tc *TierCounts) add(node string, d *gpupool.Device, t gpupool.Tier, priority int32, namespace string, holders Holders, holdersOf func() []types.NamespacedName) {
	tc.Matching[node]++
	// A GPU that only a reservation the claim does not tolerate keeps it
	// off counts as reserved, whether its members use it now or not: they
	// are not what keeps the pod off. A reserved GPU that is also
	// unhealthy counts as unhealthy.
	other, reservedBy := gpupool.Blocked(d.Device, t.Tolerations)
	switch {
	case other == nil && reservedBy != "":
		tc.Reserved[node]++
		tc.Reservations[ReservationName(reservedBy, namespace)]++
	case !d.FreeFor(t):
		if holders != nil {
			tc.classifyHeld(node, holdersOf(), priority, holders)
		}
	case other != nil:
		tc.Tainted[node]++
	default:
		tc.Free[node]++
	}
}

// rejectedDevice is a device of the pool that a tier's selector rejects.
type rejectedDevice struct{ model, selector string }

// modelSelector matches a CEL selector that tests the model attribute.
var modelSelector = regexp.MustCompile(`\.` + string(gpuv1.AttributeModel) + `\b|\["` + string(gpuv1.AttributeModel) + `"\]`)

// countRejected sorts the devices a tier's selectors reject: a GPU of
// another model than the tier's matching ones (rejected by a selector on
// the model) is "other model", one of the same model rejected by another
// selector (driver version, memory, ...) an unmet constraint.
func (tc *TierCounts) countRejected(rejected []rejectedDevice, models map[string]bool) {
	for _, d := range rejected {
		if !models[d.model] && modelSelector.MatchString(d.selector) {
			tc.OtherModel++
			continue
		}
		if tc.Unmet == nil {
			tc.Unmet = map[string]int{}
		}
		tc.Unmet[d.selector]++
		if len(models) == 0 && d.model != "" {
			// No GPU matches: name the tier after the model that fails.
			tc.Name = d.model
		}
	}
}

// ReservationName is how the reservation holding a GPU, known by its taint
// value "<namespace>.<name>", is named to a pod of namespace: "ns/name"
// when it is the pod's own namespace's, OtherNamespaces for any other
// (what Rota tells a tenant never names another tenant's reservations).
func ReservationName(taintValue, namespace string) string {
	ns, name, ok := gpuv1.ParseReservedTaintValue(taintValue)
	if !ok || ns != namespace {
		return OtherNamespaces
	}
	return ns + "/" + name
}

// ReservationLabel renders a ReservationName for people:
// "GPUReservation team-a/serving", "a GPUReservation of another namespace".
func ReservationLabel(name string) string {
	if name == OtherNamespaces {
		return "a GPUReservation of another namespace"
	}
	return "GPUReservation " + name
}

// classifyHeld counts an allocated device, held by held, as pinned (some
// holder must keep running) or preemptible (every holder has lower
// priority).
func (tc *TierCounts) classifyHeld(node string, held []types.NamespacedName, priority int32, holders Holders) {
	if len(held) == 0 {
		return
	}
	lower := true
	for _, h := range held {
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
