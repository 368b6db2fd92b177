package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people: the scenario and its nodes, each
// checkpoint, then the totals and the verdict.
func (r *Report) WriteText(w io.Writer) {
	loc := r.Start.Location()
	ts := func(t time.Time) string { return t.In(loc).Format("Mon 2006-01-02 15:04:05") }
	fmt.Fprintf(w, "Scenario %s: %s → %s (simulated), %.1fs wall time\n", r.Scenario, ts(r.Start), ts(r.End), r.WallSeconds)
	for _, n := range r.Nodes {
		writeNode(w, n)
	}
	for _, cp := range r.Checkpoints {
		writeCheckpoint(w, cp, ts)
	}
	fmt.Fprintf(w, "\n%d transitions in all; at most %d GPUs in use at once\n", len(r.Transitions), r.MaxGPUsInUse)
	if r.Timeline != "" {
		fmt.Fprintf(w, "timeline: %s\n", r.Timeline)
	}
	if r.Passed {
		fmt.Fprintln(w, "RESULT: PASS")
	} else {
		fmt.Fprintln(w, "RESULT: FAIL")
	}
}

// writeNode writes a node's line: its GPUs counted per model, models in the
// order they first appear.
func writeNode(w io.Writer, n Node) {
	models := map[string]int{}
	var order []string
	for _, g := range n.GPUs {
		if models[g.Model] == 0 {
			order = append(order, g.Model)
		}
		models[g.Model]++
	}
	var parts []string
	for _, m := range order {
		parts = append(parts, fmt.Sprintf("%d× %s", models[m], m))
	}
	fmt.Fprintf(w, "  node %s (%s): %s\n", n.Name, n.Profile, strings.Join(parts, ", "))
}

// writeCheckpoint writes a checkpoint's verdict and failures, then what was
// observed at it: pods, schedule targets, reservations and transitions.
func writeCheckpoint(w io.Writer, cp Checkpoint, ts func(time.Time) string) {
	verdict := "PASS"
	if !cp.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\n== checkpoint %s at %s (+%s) — %s, %d GPUs in use\n", cp.Name, ts(cp.Time), cp.Offset, verdict, cp.GPUsInUse)
	for _, f := range cp.Failures {
		fmt.Fprintf(w, "   ✗ %s\n", f)
	}
	if len(cp.Pods) > 0 {
		fmt.Fprintln(w, "  pods:")
	}
	for _, p := range cp.Pods {
		writePod(w, p)
	}
	if len(cp.Targets) > 0 {
		fmt.Fprintln(w, "  schedule targets:")
	}
	for _, t := range cp.Targets {
		fmt.Fprintf(w, "    %s %-12s %-10s %s", t.Schedule, t.Target, t.Phase, t.Reason)
		if t.DesiredState != "" {
			fmt.Fprintf(w, " (want %s from %s)", t.DesiredState, t.Source)
		}
		fmt.Fprintln(w)
	}
	if len(cp.Reservations) > 0 {
		fmt.Fprintln(w, "  reservations:")
	}
	for _, rv := range cp.Reservations {
		fmt.Fprintf(w, "    %s %s: %d GPU(s), budget %d/%d MiB\n", rv.Name, rv.Phase, rv.GPUs, rv.BudgetUsedMiB, rv.BudgetTotalMiB)
	}
	if len(cp.Transitions) > 0 {
		fmt.Fprintln(w, "  transitions since the previous checkpoint:")
		for _, t := range cp.Transitions {
			writeTransition(w, t, ts)
		}
	}
}

// writePod writes a pod's line (phase, readiness, node, devices) and, while
// it waits, why.
func writePod(w io.Writer, p Pod) {
	ready := ""
	if p.Ready {
		ready = " Ready"
	}
	fmt.Fprintf(w, "    %-40s %-12s%s", p.Name, p.Phase, ready)
	if p.Node != "" {
		fmt.Fprintf(w, " on %s", p.Node)
	}
	for _, d := range p.Devices {
		fmt.Fprintf(w, " [%s %s %s]", d.Name, d.Model, d.UUID)
	}
	fmt.Fprintln(w)
	if p.Waiting != nil {
		code := ""
		if p.Waiting.Code != "" {
			code = " [" + p.Waiting.Code + "]"
		}
		fmt.Fprintf(w, "      waiting%s: %s: %s\n", code, p.Waiting.Reason, oneLine(p.Waiting.Message))
		for _, o := range p.Waiting.Advice {
			fmt.Fprintf(w, "        to admit, %s: %s\n", o.Kind, oneLine(o.Summary))
		}
	}
}

func writeTransition(w io.Writer, t Transition, ts func(time.Time) string) {
	var steps []string
	for _, s := range t.Steps {
		step := s.Action + " " + s.Target
		if s.Replicas != nil {
			step += fmt.Sprintf(" (%d)", *s.Replicas)
		}
		step += " " + s.Phase
		if s.Reason != "" {
			step += "/" + s.Reason
		}
		steps = append(steps, step)
	}
	fmt.Fprintf(w, "    %s %s: %s\n", ts(t.At), t.Schedule, strings.Join(steps, ", then "))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
