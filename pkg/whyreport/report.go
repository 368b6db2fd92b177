// Package whyreport builds `kubectl rota why`'s answer for one pod from the
// pod's rota.dev/Waiting condition, its PodScheduled condition and its
// events, and prints it (docs/user-guide.md, "Why does my pod wait?").
package whyreport

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
)

// maxDecisions is how many of the newest decisions a report keeps.
const maxDecisions = 5

// decisionReasons are the events that record a scheduling decision.
// (The kubelet's FailedPrepareDynamicResources is not: the StartFailed
// Event and condition carry its message.)
var decisionReasons = map[string]bool{"Scheduled": true, "FailedScheduling": true, "TieredPlacement": true}

// Report is the answer for one pod; `-o json|yaml` prints it as is.
type Report struct {
	Pod string `json:"pod"`
	// Verdict is the one line that answers the question, with the numbers.
	Verdict string `json:"verdict"`
	Node    string `json:"node,omitempty"`
	Waiting bool   `json:"waiting"`
	Reason  string `json:"reason"`
	// Message is the rota.dev/Waiting condition's message: the long form.
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	Tier    string    `json:"tier,omitempty"`
	// Devices are the placed pod's devices with their UUIDs.
	Devices string `json:"devices,omitempty"`
	// PassedOver are, for a pod placed on a fallback tier, the tiers it
	// preferred and why each was not used, with the numbers at placement
	// (its rota.dev/passed-over annotation).
	PassedOver []waits.PassedTier `json:"passedOver,omitempty"`
	// Tiers and Notes are what the scheduler wrote in the pod's
	// rota.dev/wait-detail annotation.
	Tiers []waits.TierStat `json:"tiers,omitempty"`
	Notes []string         `json:"notes,omitempty"`
	// Advice is the scheduler's unblock advice (its rota.dev/advice
	// annotation): the options that would admit the pod, cheapest kind
	// first (docs/admission.md, "Unblock advice").
	Advice []advisor.Option `json:"advice,omitempty"`
	// AdviceTruncated: the advisor's search stopped at its bound, so a
	// cheaper move plan may exist.
	AdviceTruncated bool `json:"adviceTruncated,omitempty"`
	// Reclaim is the reclaim under way for the pod (its rota.dev/reclaim
	// annotation); Reclaiming says it with each victim's state now
	// (Report.DescribeReclaim).
	Reclaim    *waits.ReclaimDetail `json:"reclaim,omitempty"`
	Reclaiming string               `json:"reclaiming,omitempty"`
	// Analysis is the PodScheduled condition's message.
	Analysis  string  `json:"analysis,omitempty"`
	Decisions []Event `json:"decisions,omitempty"`
	// explained is true when the pod's rota.dev/Waiting condition
	// explains it, so the scheduler's own message need not.
	explained bool
}

// Event is one scheduling decision recorded as an Event.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	// Count is how many times the event was seen, if more than once.
	Count int32 `json:"count,omitempty"`
}

// EventLister lists Events; client-go's typed Events client is one.
type EventLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.EventList, error)
}

// PodEvents lists the events whose involved object is the pod.
func PodEvents(ctx context.Context, events EventLister, pod *v1.Pod) ([]v1.Event, error) {
	list, err := events.List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.uid": string(pod.UID)}.String()})
	if err != nil {
		return nil, fmt.Errorf("list events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return list.Items, nil
}

// Explain builds the report from the pod and its events.
func Explain(pod *v1.Pod, evs []v1.Event) Report {
	r := Report{Pod: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName,
		Tier: pod.Annotations[gpuv1.TierAnnotation], Devices: pod.Annotations[gpuv1.DevicesAnnotation]}
	switch c := waits.Current(pod); {
	case c != nil && c.Status == v1.ConditionTrue && pod.Spec.NodeName == "":
		r.Waiting, r.Reason, r.Message, r.Since, r.explained = true, c.Reason, c.Message, c.LastTransitionTime.Time, true
	case c != nil && c.Status == v1.ConditionTrue && c.Reason == string(waits.StartFailed):
		// Placed, but its node cannot start it: it still waits.
		r.Waiting, r.Reason, r.Message, r.Since, r.explained = true, c.Reason, c.Message, c.LastTransitionTime.Time, true
	case c != nil:
		r.Reason, r.Message, r.Since = c.Reason, c.Message, c.LastTransitionTime.Time
	case pod.Spec.NodeName != "":
		r.Reason, r.Message = waits.Placed, "placed on node "+pod.Spec.NodeName+" without waiting"
	default:
		r.Waiting, r.Reason, r.Message = true, string(waits.NotAttempted), "queued; the scheduler has not reported an attempt yet"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
			r.Analysis = c.Message
		}
	}
	if pod.Spec.NodeName != "" {
		r.PassedOver, _ = waits.PassedOver(pod)
	} else if raw, ok := pod.Annotations[gpuv1.ReclaimAnnotation]; ok {
		var d waits.ReclaimDetail
		if err := json.Unmarshal([]byte(raw), &d); err == nil {
			r.Reclaim = &d
		}
	}
	r.Verdict = verdict(pod, &r)
	r.Decisions = decisions(evs)
	return r
}

// verdict is the first line: for a waiting pod the condition's short
// message (with the tiers and notes of the scheduler's wait detail behind
// it); for a placed pod where it went and on which tier.
func verdict(pod *v1.Pod, r *Report) string {
	if !r.Waiting {
		v := "P" + strings.TrimPrefix(r.Message, "p")
		if r.Tier != "" {
			v += "; tier " + r.Tier
		}
		return v
	}
	// The message ends with the first unblock option, when there is one;
	// the report lists every option apart.
	headline, _, advised := strings.Cut(r.Message, waits.AdviceSeparator)
	if advised {
		if raw, ok := pod.Annotations[gpuv1.AdviceAnnotation]; ok {
			var adv advisor.Advice
			if err := json.Unmarshal([]byte(raw), &adv); err == nil {
				r.Advice, r.AdviceTruncated = adv.Options, adv.Truncated
			}
		}
	}
	// The detail belongs to the condition only while its headline is the
	// condition's message (another writer, such as the Gang plugin's, may
	// have changed the condition since).
	if d, ok := waits.CurrentDetail(pod); ok && d.Headline != "" && d.Headline == headline {
		r.Tiers, r.Notes = d.Tiers, d.Notes
	}
	return "Waiting: " + headline
}

// decisions are the newest scheduling decisions among evs, newest first.
func decisions(evs []v1.Event) []Event {
	var out []Event
	for _, e := range evs {
		if decisionReasons[e.Reason] || isWaitReason(e.Reason) {
			out = append(out, Event{Time: eventTime(e), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: count(e)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	if len(out) > maxDecisions {
		out = out[:maxDecisions]
	}
	return out
}

func eventTime(e v1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

func isWaitReason(reason string) bool {
	for _, w := range waits.AllReasons {
		if string(w) == reason {
			return true
		}
	}
	return false
}

// count is how many times the event was seen.
func count(e v1.Event) int32 {
	if e.Series != nil && e.Series.Count > e.Count {
		return e.Series.Count
	}
	return e.Count
}

// DescribeReclaim fills in Reclaiming: the reclaim under way at now, each
// victim evicted (gone reports a pod that no longer runs), evicting or in
// its checkpoint grace, with the time left.
func (r *Report) DescribeReclaim(now time.Time, gone func(namespace, name string) bool) {
	if r.Reclaim == nil {
		return
	}
	r.Reclaiming = r.Reclaim.Describe(now, func(v waits.ReclaimVictim) bool {
		for _, key := range v.Pods {
			ns, name, _ := strings.Cut(key, "/")
			if !gone(ns, name) {
				return false
			}
		}
		return true
	})
}
