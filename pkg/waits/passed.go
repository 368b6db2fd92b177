package waits

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// PassedTier says why a tier preferred to the one a pod was placed on was
// not used: how many of its GPUs were free when the pod was placed and what
// kept each of the others. Tiering writes the list as JSON in the pod's
// rota.dev/passed-over annotation (on the Binding) and one Line per tier in
// its TieredPlacement Event. Its fields are stable.
type PassedTier struct {
	// Request is the request's name, set only when the pod has several.
	Request string `json:"request,omitempty"`
	// Tier is the passed-over alternative's place, "1/2".
	Tier string `json:"tier"`
	// Name is the model of the matching GPUs, else the subrequest's name.
	Name string `json:"name"`
	// Need is how many devices the tier needs on one node.
	Need int `json:"need"`
	// Matching devices are those every selector of the tier accepts.
	Matching int `json:"matching"`
	Free     int `json:"free"`
	// LargestFree is the most free matching devices on one node.
	LargestFree int `json:"largestFree"`
	// Excluded matching devices are on nodes the pod's node selector or
	// required node affinity excludes; each device counts once, under the
	// first of excluded, reserved, allocated, tainted that applies.
	Excluded int `json:"excluded,omitempty"`
	// Reserved counts, per GPUReservation ("namespace/name") the pod is not
	// a member of, the matching devices it holds.
	Reserved map[string]int `json:"reserved,omitempty"`
	// Allocated matching devices are held by claims.
	Allocated int `json:"allocated"`
	// Tainted counts, per taint key, free matching devices with a taint
	// the claim does not tolerate (gpu.rota.dev/unhealthy).
	Tainted map[string]int `json:"tainted,omitempty"`
	// Problem, when set, is why the tier could not be counted ("device
	// class gpu not found", "none in the pool").
	Problem string `json:"problem,omitempty"`
}

// Line renders the tier for people: "H100 tier: 0 of 16 free — 12
// allocated, 4 tainted gpu.rota.dev/unhealthy".
func (p PassedTier) Line() string {
	var b strings.Builder
	if p.Request != "" {
		b.WriteString(p.Request + " ")
	}
	b.WriteString(p.Name + " tier: ")
	if p.Problem != "" {
		b.WriteString(p.Problem)
		return b.String()
	}
	fmt.Fprintf(&b, "%d of %d free", p.Free, p.Matching)
	if p.Free >= p.Need && p.LargestFree < p.Need {
		fmt.Fprintf(&b, ", at most %d on one node", p.LargestFree)
	}
	var why []string
	if p.Allocated > 0 {
		why = append(why, fmt.Sprintf("%d allocated", p.Allocated))
	}
	for _, k := range slices.Sorted(maps.Keys(p.Tainted)) {
		why = append(why, fmt.Sprintf("%d tainted %s", p.Tainted[k], k))
	}
	for _, k := range slices.Sorted(maps.Keys(p.Reserved)) {
		why = append(why, fmt.Sprintf("%d reserved by %s", p.Reserved[k], ReservationLabel(k)))
	}
	if p.Excluded > 0 {
		why = append(why, fmt.Sprintf("%d on nodes the pod's node selector or affinity excludes", p.Excluded))
	}
	if len(why) > 0 {
		b.WriteString(" — " + strings.Join(why, ", "))
	}
	return b.String()
}

// EncodePassedOver is the rota.dev/passed-over annotation's value for ts.
func EncodePassedOver(ts []PassedTier) (string, error) {
	b, err := json.Marshal(ts)
	if err != nil {
		return "", fmt.Errorf("encode passed-over tiers: %w", err)
	}
	return string(b), nil
}

// PassedOver reads a placed pod's rota.dev/passed-over annotation: the
// tiers preferred to the one it was placed on, and why each was not used.
// ok is false when the pod has none or it does not parse.
func PassedOver(pod *v1.Pod) ([]PassedTier, bool) {
	raw, found := pod.Annotations[gpuv1.PassedOverAnnotation]
	if !found {
		return nil, false
	}
	var ts []PassedTier
	if err := json.Unmarshal([]byte(raw), &ts); err != nil {
		return nil, false
	}
	return ts, true
}
