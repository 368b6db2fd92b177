package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
)

// decisionReasons are the events that record a scheduling decision.
var decisionReasons = map[string]bool{"Scheduled": true, "FailedScheduling": true, "TieredPlacement": true}

// whyReport is `kubectl rota why`'s answer; -o json prints it as is.
type whyReport struct {
	Pod       string    `json:"pod"`
	Node      string    `json:"node,omitempty"`
	Waiting   bool      `json:"waiting"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	Tier      string    `json:"tier,omitempty"`
	Analysis  string    `json:"analysis,omitempty"`
	Decisions []event   `json:"decisions,omitempty"`
}

type event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

func newWhyCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "why POD",
		Short: "Why the pod waits (or where it went): reason, tier analysis, last decisions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			client, _, ns, err := o.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			pod, err := client.CoreV1().Pods(ns).Get(ctx, args[0], metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get pod %s/%s: %w", ns, args[0], err)
			}
			evs, err := podEvents(ctx, client.CoreV1().Events(ns), pod)
			if err != nil {
				return err
			}
			r := explainPod(pod, evs)
			if o.output == "json" {
				return writeJSON(o.streams.Out, r)
			}
			return writeWhy(o.streams.Out, r, o.width)
		},
	}
}

type eventLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.EventList, error)
}

func podEvents(ctx context.Context, events eventLister, pod *v1.Pod) ([]v1.Event, error) {
	list, err := events.List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.uid": string(pod.UID)}.String()})
	if err != nil {
		return nil, fmt.Errorf("list events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return list.Items, nil
}

func eventTime(e v1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// explainPod builds the report from the pod and its events.
func explainPod(pod *v1.Pod, evs []v1.Event) whyReport {
	r := whyReport{Pod: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName, Tier: pod.Annotations[gpuv1.TierAnnotation]}
	switch c := waits.Current(pod); {
	case c != nil && c.Status == v1.ConditionTrue && pod.Spec.NodeName == "":
		r.Waiting, r.Reason, r.Message, r.Since = true, c.Reason, c.Message, c.LastTransitionTime.Time
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
	var decisions []event
	for _, e := range evs {
		if decisionReasons[e.Reason] || isWaitReason(e.Reason) {
			decisions = append(decisions, event{Time: eventTime(e), Type: e.Type, Reason: e.Reason, Message: e.Message})
		}
	}
	sort.SliceStable(decisions, func(i, j int) bool { return decisions[i].Time.After(decisions[j].Time) })
	if len(decisions) > 5 {
		decisions = decisions[:5]
	}
	r.Decisions = decisions
	return r
}

func isWaitReason(reason string) bool {
	for _, w := range waits.AllReasons {
		if string(w) == reason {
			return true
		}
	}
	return false
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

func writeWhy(w io.Writer, r whyReport, width int) error {
	state := "placed on " + r.Node
	if r.Waiting {
		state = "waiting"
	}
	fmt.Fprintf(w, "Pod:      %s (%s)\n", r.Pod, state)
	since := ""
	if !r.Since.IsZero() {
		since = " since " + r.Since.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "Reason:   %s%s\n", r.Reason, since)
	writeWrapped(w, "Message:  ", r.Message, width)
	if r.Tier != "" {
		fmt.Fprintf(w, "Tier:     %s\n", r.Tier)
	}
	if r.Analysis != "" {
		writeWrapped(w, "Analysis: ", r.Analysis, width)
	}
	if len(r.Decisions) > 0 {
		fmt.Fprintln(w, "Last decisions (newest first):")
		for _, d := range r.Decisions {
			writeWrapped(w, fmt.Sprintf("  %s %s: ", d.Time.UTC().Format("15:04:05"), d.Reason), d.Message, width)
		}
	}
	return nil
}

// writeWrapped prints text after label, one "; "-separated part per line
// and each line wrapped at width, indented under the label.
func writeWrapped(w io.Writer, label, text string, width int) {
	indent := strings.Repeat(" ", len(label))
	prefix := label
	for _, part := range strings.Split(text, "; ") {
		for _, line := range wrap(part, width-len(label)) {
			fmt.Fprintf(w, "%s%s\n", prefix, line)
			prefix = indent
		}
	}
	if text == "" {
		fmt.Fprintln(w, label)
	}
}

// wrap breaks s into lines of at most width runes at spaces; a word
// longer than width gets a line of its own.
func wrap(s string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, word := range strings.Fields(s) {
		if cur.Len() > 0 && cur.Len()+1+len(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}
