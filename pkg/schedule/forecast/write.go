package forecast

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rota-dev/rota/pkg/schedule"
)

// Record types of the JSON output (docs/schedule.md, "Capacity forecast").
const (
	RecordCapacity   = "capacity"
	RecordTransition = "transition"
	RecordOvercommit = "overcommit"
	RecordWarning    = "warning"
	RecordNode       = "node"
	RecordFallback   = "fallback"
)

type fallbackRecord struct {
	Type      string `json:"type"`
	Load      string `json:"load"`
	Target    bool   `json:"target"`
	From      string `json:"from"`
	To        string `json:"to"`
	Model     string `json:"model"`
	Preferred string `json:"preferred"`
	Tier      string `json:"tier,omitempty"`
	GPUs      int    `json:"gpus"`
}

type nodeRecord struct {
	Type     string `json:"type"`
	Node     string `json:"node"`
	Model    string `json:"model"`
	From     string `json:"from"`
	To       string `json:"to"`
	Demand   int    `json:"demand"`
	Capacity int    `json:"capacity"`
}

type warningRecord struct {
	Type     string `json:"type"`
	Reason   string `json:"reason"`
	Schedule string `json:"schedule"`
	Target   string `json:"target"`
	At       string `json:"at"`
	Message  string `json:"message"`
}

type capacityRecord struct {
	Type     string `json:"type"`
	Model    string `json:"model"`
	From     string `json:"from"`
	To       string `json:"to"`
	Demand   int    `json:"demand"`
	Capacity int    `json:"capacity"`
}

type transitionRecord struct {
	Type     string   `json:"type"`
	Schedule string   `json:"schedule"`
	At       string   `json:"at"`
	Model    string   `json:"model"`
	Before   int      `json:"before"`
	Peak     int      `json:"peak"`
	After    int      `json:"after"`
	Capacity int      `json:"capacity"`
	Steps    []string `json:"steps"`
}

type overcommitRecord struct {
	Type     string   `json:"type"`
	Model    string   `json:"model"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Demand   int      `json:"demand"`
	Capacity int      `json:"capacity"`
	Targets  []string `json:"targets"`
	Others   []string `json:"others,omitempty"`
	Reason   string   `json:"reason"`
	Detail   string   `json:"detail,omitempty"`
}

// WriteJSON writes one JSON object per line, times in loc: per model, a
// "capacity" record for every stretch where its demand or capacity
// changes; a "node" record per model, node and stretch where the pods pack
// and the node's demand changes; a "transition" record per transition and
// model it touches; an "overcommit" record per over-committed window; a
// "fallback" record per window where a load runs on a model other than
// its first choice; a "warning" record per refusal the controller will
// make at a transition.
func WriteJSON(w io.Writer, f *Forecast, loc *time.Location) error {
	enc := json.NewEncoder(w)
	ts := func(t time.Time) string { return t.In(loc).Format(time.RFC3339) }
	for _, m := range f.Models {
		for _, p := range f.Series(m) {
			if err := enc.Encode(capacityRecord{RecordCapacity, m, ts(p.From), ts(p.To), p.Demand, f.Capacity[m]}); err != nil {
				return err
			}
		}
	}
	for _, m := range f.Models {
		for _, node := range slices.Sorted(maps.Keys(f.Nodes)) {
			if f.Nodes[node][m] == 0 {
				continue
			}
			for _, p := range f.NodeSeries(m, node) {
				if err := enc.Encode(nodeRecord{RecordNode, node, m, ts(p.From), ts(p.To), p.Demand, f.Nodes[node][m]}); err != nil {
					return err
				}
			}
		}
	}
	for _, tr := range f.Transitions {
		for _, m := range slices.Sorted(maps.Keys(tr.Peak)) {
			rec := transitionRecord{RecordTransition, tr.Schedule, ts(tr.At), m, tr.Before[m], tr.Peak[m], tr.After[m], f.Capacity[m], stepTexts(tr.Steps)}
			if err := enc.Encode(rec); err != nil {
				return err
			}
		}
	}
	for _, oc := range f.Overcommits {
		targets := oc.Targets
		if targets == nil {
			targets = []string{}
		}
		rec := overcommitRecord{RecordOvercommit, oc.Model, ts(oc.From), ts(oc.To), oc.Demand, oc.Capacity, targets, oc.Others, oc.Reason, oc.Detail}
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	for _, fb := range f.Fallbacks {
		rec := fallbackRecord{RecordFallback, fb.Load, fb.Target, ts(fb.From), ts(fb.To), fb.Model, fb.Preferred, fb.Tier, fb.GPUs}
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	for _, w := range f.Warnings {
		if err := enc.Encode(warningRecord{RecordWarning, w.Reason, w.Schedule, w.Target, ts(w.At), w.Message}); err != nil {
			return err
		}
	}
	return nil
}

func stepTexts(steps []schedule.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = string(s.Action) + " " + s.Target
		if s.Replicas > 0 {
			out[i] += fmt.Sprintf(" (%d)", s.Replicas)
		}
	}
	return out
}

const tableTime = "Mon 01-02 15:04"

// WriteTable writes the forecast for people, times in loc: the pool, the
// demand of each model over time, the transitions, the loads on a
// fallback model, and the over-committed windows with the pods that find
// no node.
func WriteTable(w io.Writer, f *Forecast, loc *time.Location) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	at := func(t time.Time) string { return t.In(loc).Format(tableTime) }
	fmt.Fprintf(tw, "Forecast %s → %s (%s)\n", at(f.From), at(f.To), loc)
	fmt.Fprintln(tw, "\nPOOL\tHEALTHY UNRESERVED GPUs\tPER NODE")
	for _, m := range f.Models {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", ModelLabel(m), f.Capacity[m], f.perNode(m))
	}
	for _, m := range f.Models {
		fmt.Fprintf(tw, "\nDEMAND %s (capacity %d)\tTO\tGPUs\tPER NODE\tRUNNING\n", ModelLabel(m), f.Capacity[m])
		for _, p := range f.series(m, true) {
			mark := ""
			if p.Demand > f.Capacity[m] {
				mark = "  OVER"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d%s\t%s\t%s\n", at(p.From), at(p.To), p.Demand, mark, perNodeText(p), strings.Join(p.Loads, ", "))
		}
	}
	fmt.Fprintln(tw, "\nTRANSITION\tSCHEDULE\tSTEPS\tBEFORE → PEAK → AFTER")
	for _, tr := range f.Transitions {
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(tr.Peak)) {
			p := fmt.Sprintf("%s %d → %d → %d", ModelLabel(m), tr.Before[m], tr.Peak[m], tr.After[m])
			if tr.Peak[m] > f.Capacity[m] {
				p += fmt.Sprintf(" OVER %d", f.Capacity[m])
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", at(tr.At), tr.Schedule, strings.Join(stepTexts(tr.Steps), ", "), strings.Join(parts, "; "))
	}
	if len(f.Fallbacks) > 0 {
		fmt.Fprintln(tw, "\nFALLBACK FROM\tTO\tWORKLOAD\tON")
		for _, fb := range f.Fallbacks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", at(fb.From), at(fb.To), fb.Load, fb.Text())
		}
	}
	if len(f.Overcommits) == 0 {
		fmt.Fprintln(tw, "\nNo over-commit: every window fits the pool by count and per node.")
	} else {
		fmt.Fprintln(tw, "\nOVER-COMMITTED FROM\tTO\tMODEL\tDEMAND/CAPACITY\tREASON\tTARGETS")
		for _, oc := range f.Overcommits {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", at(oc.From), at(oc.To), ModelLabel(oc.Model), oc.Demand, oc.Capacity, oc.Reason, oc.Collisions())
		}
		for _, oc := range f.Overcommits {
			if oc.Detail != "" {
				fmt.Fprintf(tw, "  %s: %s\n", at(oc.From), oc.Detail)
			}
		}
		for _, seg := range f.Segments {
			for _, u := range seg.Unplaced {
				fmt.Fprintf(tw, "  %s: %s not placed (%s)\n", at(seg.From), u.Text(), u.Reason)
			}
		}
	}
	if len(f.Warnings) > 0 {
		fmt.Fprintln(tw, "\nWARNING AT\tSCHEDULE\tREASON\tMESSAGE")
		for _, w := range f.Warnings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", at(w.At), w.Schedule, w.Reason, w.Message)
		}
	}
	for _, n := range f.Notes {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	return tw.Flush()
}

// ModelLabel names a model, "(no model)" for devices without the attribute.
func ModelLabel(m string) string {
	if m == "" {
		return "(no model)"
	}
	return m
}

func (f *Forecast) perNode(model string) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(f.Nodes)) {
		if c := f.Nodes[n][model]; c > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", n, c))
		}
	}
	return strings.Join(parts, ", ")
}
