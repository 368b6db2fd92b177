package waits

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// reservedVerdict explains a tier that GPUs held by reservations the pod
// is not a member of would make fit (with unhealthy ones, if those are
// needed too).
func reservedVerdict(t TierCounts) Verdict {
	msg := fmt.Sprintf("%s: needs %s, %d free and %d more matching but reserved by %s (%s)",
		t.Label, gpus(t.Need), sum(t.Free), sum(t.Reserved), reservations(t), spread(t.Reserved))
	if tainted := sum(t.Tainted); tainted > 0 {
		msg += fmt.Sprintf(" or tainted unhealthy (%s)", spread(t.Tainted))
	}
	it := "it"
	if len(t.Reservations) > 1 {
		it = "them"
	}
	note := fmt.Sprintf("the pod is not a member of %s (only members' claims tolerate a reservation's %s taint)", it, gpuv1.ReservedTaintKey)
	msg += "; " + note
	held := fmt.Sprintf("the pod is not a member of %s (only members' claims tolerate a reservation's %s taint); reserved per node: %s",
		reservations(t), gpuv1.ReservedTaintKey, spread(t.Reserved))
	return Verdict{Reason: Reserved, Message: msg, Detail: Detail{Notes: []string{held}}}
}

// OtherNamespaces is the key of TierCounts.Reservations under which the
// reservations of namespaces other than the waiting pod's are counted.
// No namespace or name has parentheses, so it cannot be a real one.
const OtherNamespaces = "(other namespaces)"

// reservations names the reservations holding a tier's reserved devices:
// "GPUReservation team-a/serving", or with several, how many each holds:
// "GPUReservations team-a/a (1), team-a/b (2)". Those of other namespaces
// than the pod's are not named: "GPUReservations of other namespaces",
// "GPUReservations team-a/a (1) and of other namespaces (2)".
func reservations(t TierCounts) string {
	names := slices.Sorted(maps.Keys(t.Reservations))
	others, hasOthers := t.Reservations[OtherNamespaces]
	names = slices.DeleteFunc(names, func(n string) bool { return n == OtherNamespaces })
	switch {
	case len(names) == 0:
		return "GPUReservations of other namespaces"
	case len(names) == 1 && !hasOthers:
		return "GPUReservation " + names[0]
	}
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s (%d)", n, t.Reservations[n]))
	}
	s := "GPUReservations " + strings.Join(parts, ", ")
	if hasOthers {
		s += fmt.Sprintf(" and of other namespaces (%d)", others)
	}
	return s
}
