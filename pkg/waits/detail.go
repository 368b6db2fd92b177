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

// ConditionMessage is the rota.dev/Waiting condition's message for v: the
// short form with the numbers (the headline); the long form is in the
// scheduler's PodScheduled message and `kubectl rota why`.
func ConditionMessage(v Verdict) string {
	if v.Detail.Headline != "" {
		return v.Detail.Headline
	}
	return v.Message
}

// Detail is the structured form of a wait, written as JSON in the pod's
// rota.dev/wait-detail annotation so that `kubectl rota why` prints the
// numbers without parsing the condition's prose. Its fields are stable.
type Detail struct {
	// Headline answers "why does it wait?" in one line with the numbers.
	Headline string `json:"headline"`
	// Tiers are the numbers of every tier of every request still to allocate.
	Tiers []TierStat `json:"tiers,omitempty"`
	// Notes say what the numbers do not: what preemption could do, a
	// constraint no node can meet, reservation membership.
	Notes []string `json:"notes,omitempty"`
	// Cause says what keeps the pod out when the reason alone does not
	// (Cause); empty for a plain wait for capacity. For users and tools:
	// the scheduler's plugins read it from Causes, not from the pod.
	Cause Cause `json:"cause,omitempty"`
}

// TierStat is what the pool offers one tier of a request, summed over nodes.
type TierStat struct {
	// Request is the request's name, set only when the pod has several.
	Request string `json:"request,omitempty"`
	// Tier is "1/2" for a firstAvailable alternative, empty otherwise.
	Tier string `json:"tier,omitempty"`
	// Name is the model of the matching GPUs, else the (sub)request's name.
	Name string `json:"name"`
	// Need is how many devices the tier needs on one node.
	Need int `json:"need"`
	// Matching devices are those every selector of the tier accepts.
	Matching int `json:"matching"`
	Free     int `json:"free"`
	// LargestFree is the most free matching devices on one node, on LargestFreeNode.
	LargestFree     int    `json:"largestFree"`
	LargestFreeNode string `json:"largestFreeNode,omitempty"`
	// Allocated matching devices are held by claims.
	Allocated int `json:"allocated"`
	// Reserved matching devices are held by GPUReservations the pod is
	// not a member of; Tainted ones carry another blocking taint (unhealthy).
	Reserved int `json:"reserved"`
	Tainted  int `json:"tainted"`
	// OtherModel counts the pool's GPUs of another model than the tier asks for.
	OtherModel int `json:"otherModel"`
	// Unmet counts, per selector, GPUs of the tier's model that the
	// selector rejects (driver version, memory, ...): real unmet constraints.
	Unmet map[string]int `json:"unmet,omitempty"`
}

// name names the tier for people: its model, else its label.
func (t TierCounts) name() string {
	if t.Name != "" {
		return t.Name
	}
	return t.Label
}

// Stat sums a tier's per-node counts.
func (t TierCounts) Stat() TierStat {
	node, block := largest(t.Free)
	free, tainted, reserved := sum(t.Free), sum(t.Tainted), sum(t.Reserved)
	s := TierStat{
		Request: t.Request, Tier: t.Tier, Name: t.name(), Need: t.Need,
		Matching: sum(t.Matching), Free: free, LargestFree: block, LargestFreeNode: node,
		Reserved: reserved, Tainted: tainted, OtherModel: t.OtherModel,
	}
	s.Allocated = max(s.Matching-free-tainted-reserved, 0)
	if len(t.Unmet) > 0 {
		s.Unmet = map[string]int{}
		for k, v := range t.Unmet {
			s.Unmet[k] = v
		}
	}
	return s
}

// Line renders the stat for people:
// "1/2 H100: 0/8 free, 8 allocated, 0 reserved, 0 tainted, 8 other model".
func (s TierStat) Line() string {
	var b strings.Builder
	if s.Request != "" {
		b.WriteString(s.Request + " ")
	}
	if s.Tier != "" {
		b.WriteString(s.Tier + " ")
	}
	fmt.Fprintf(&b, "%s: %d/%d free", s.Name, s.Free, s.Matching)
	if s.Free > 0 && s.LargestFree < s.Need {
		fmt.Fprintf(&b, " (at most %d on one node, %s)", s.LargestFree, s.LargestFreeNode)
	}
	fmt.Fprintf(&b, ", %d allocated, %d reserved, %d tainted, %d other model", s.Allocated, s.Reserved, s.Tainted, s.OtherModel)
	for _, expr := range slices.Sorted(maps.Keys(s.Unmet)) {
		fmt.Fprintf(&b, ", %d fail constraint %s", s.Unmet[expr], expr)
	}
	return b.String()
}

// headline says in one line why no tier of a request fits, e.g. "no tier
// has 4 free GPUs on one node — H100 0/8 free, A100 0/8 free". A tier's
// part adds what keeps free GPUs from it: spread over nodes, reserved,
// tainted, failing a constraint.
func headline(tiers []TierCounts) string {
	parts := make([]string, 0, len(tiers))
	sameNeed := true
	for _, t := range tiers {
		sameNeed = sameNeed && t.Need == tiers[0].Need
	}
	for _, t := range tiers {
		parts = append(parts, tierPart(t, !sameNeed))
	}
	list := strings.Join(parts, ", ")
	switch {
	case len(tiers) == 1:
		return fmt.Sprintf("needs %s on one node — %s", gpus(tiers[0].Need), list)
	case sameNeed:
		return fmt.Sprintf("no tier has %s on one node — %s", freeGPUs(tiers[0].Need), list)
	default:
		return "no tier fits on one node — " + list
	}
}

// tierPart renders one tier in a headline: "H200 1/4 free (at most 1 per
// node, 1 reserved by GPUReservation team-a/serving)".
func tierPart(t TierCounts, withNeed bool) string {
	s := t.Stat()
	var extra []string
	if withNeed {
		extra = append(extra, fmt.Sprintf("needs %d", s.Need))
	}
	if s.Free >= s.Need && s.LargestFree < s.Need {
		extra = append(extra, fmt.Sprintf("at most %d per node", s.LargestFree))
	}
	if s.Reserved > 0 {
		extra = append(extra, fmt.Sprintf("%d reserved by %s", s.Reserved, reservations(t)))
	}
	if s.Tainted > 0 {
		extra = append(extra, fmt.Sprintf("%d tainted unhealthy", s.Tainted))
	}
	if n := unmet(s); n > 0 {
		extra = append(extra, fmt.Sprintf("%d fail a constraint", n))
	}
	p := fmt.Sprintf("%s %d/%d free", s.Name, s.Free, s.Matching)
	if len(extra) > 0 {
		p += " (" + strings.Join(extra, ", ") + ")"
	}
	return p
}

func freeGPUs(n int) string {
	if n == 1 {
		return "1 free GPU"
	}
	return fmt.Sprintf("%d free GPUs", n)
}

// EncodeDetail renders d as the rota.dev/wait-detail annotation's value.
func EncodeDetail(d Detail) (string, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("encode wait detail: %w", err)
	}
	return string(b), nil
}

// CurrentDetail returns the detail the scheduler wrote on the pod, if any.
func CurrentDetail(pod *v1.Pod) (Detail, bool) {
	raw, ok := pod.Annotations[gpuv1.WaitDetailAnnotation]
	if !ok {
		return Detail{}, false
	}
	var d Detail
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return Detail{}, false
	}
	return d, true
}

func unmet(s TierStat) int {
	n := 0
	for _, v := range s.Unmet {
		n += v
	}
	return n
}
