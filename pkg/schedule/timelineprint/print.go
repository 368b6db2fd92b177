// Package timelineprint prints a DeploySchedule's evaluated timeline the
// way `schedule-controller timeline` shows it: a table in the schedule's
// local time, or JSON lines (docs/schedule.md, "The timeline dry run").
package timelineprint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// The JSON lines of `timeline --output json`; field order is the documented one.
type jsonInterval struct {
	Type          string `json:"type"`
	Target        string `json:"target"`
	Start         string `json:"start"`
	End           string `json:"end"`
	State         string `json:"state"`
	Replicas      *int32 `json:"replicas"`
	AllowDowntime bool   `json:"allowDowntime"`
	Source        string `json:"source"`
}

type jsonTransition struct {
	Type  string     `json:"type"`
	At    string     `json:"at"`
	Steps []jsonStep `json:"steps"`
}

type jsonStep struct {
	Target   string `json:"target"`
	Action   string `json:"action"`
	Replicas *int32 `json:"replicas"`
}

// replicas turns the evaluator's 0 (not pinned) into JSON null.
func replicas(n int32) *int32 {
	if n == 0 {
		return nil
	}
	return &n
}

// WriteJSON writes the timeline as JSON lines: every interval, then every
// transition, times in loc.
func WriteJSON(w io.Writer, tl *schedule.Timeline, loc *time.Location) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	stamp := func(t time.Time) string { return t.In(loc).Format(time.RFC3339Nano) }
	for _, iv := range tl.Intervals {
		if err := enc.Encode(jsonInterval{
			Type: "interval", Target: iv.Target, Start: stamp(iv.Start), End: stamp(iv.End),
			State: string(iv.State), Replicas: replicas(iv.Replicas), AllowDowntime: iv.AllowDowntime, Source: iv.Source,
		}); err != nil {
			return fmt.Errorf("encoding interval: %w", err)
		}
	}
	for _, tr := range tl.Transitions {
		steps := make([]jsonStep, 0, len(tr.Steps))
		for _, st := range tr.Steps {
			steps = append(steps, jsonStep{Target: st.Target, Action: string(st.Action), Replicas: replicas(st.Replicas)})
		}
		if err := enc.Encode(jsonTransition{Type: "transition", At: stamp(tr.At), Steps: steps}); err != nil {
			return fmt.Errorf("encoding transition: %w", err)
		}
	}
	return nil
}

// WriteTable prints intervals one per row in the schedule's local time; the STEP
// column marks the rows a transition opens, and the transitions follow with their
// steps in execution order.
func WriteTable(w io.Writer, ds *v1alpha1.DeploySchedule, tl *schedule.Timeline, loc *time.Location, from, to time.Time) error {
	order := ds.Spec.TransitionOrder
	if order == "" {
		order = v1alpha1.TransitionOrderReleaseFirst
	}
	local := func(t time.Time) string { return localTime(t, loc) }
	fmt.Fprintf(w, "DeploySchedule %s in %s, %s to %s\n\n", objectName(ds), loc, local(from), local(to))

	steps := map[string]string{} // "at|target" -> step
	for _, tr := range tl.Transitions {
		for _, st := range tr.Steps {
			steps[tr.At.UTC().String()+"|"+st.Target] = stepText(st, false)
		}
	}
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "START\tEND\tTARGET\tSTATE\tREPLICAS\tALLOW DOWNTIME\tSOURCE\tSTEP")
	for _, iv := range tl.Intervals {
		step := steps[iv.Start.UTC().String()+"|"+iv.Target]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", local(iv.Start), local(iv.End), iv.Target,
			iv.State, replicasText(iv.Replicas), yesNo(iv.AllowDowntime), iv.Source, step)
	}
	fmt.Fprintf(tw, "\nTRANSITION\tSTEPS (%s)\n", order)
	for _, tr := range tl.Transitions {
		texts := make([]string, 0, len(tr.Steps))
		for i, st := range tr.Steps {
			texts = append(texts, fmt.Sprintf("%d. %s", i+1, stepText(st, true)))
		}
		fmt.Fprintf(tw, "%s\t%s\n", local(tr.At), strings.Join(texts, "  "))
	}
	if len(tl.Transitions) == 0 {
		fmt.Fprintln(tw, "none in this range\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Empty last cells leave padding behind; drop it.
	for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	return nil
}

// localTime shows seconds only when there are any, and the zone abbreviation so
// the two readings of an ambiguous hour differ.
func localTime(t time.Time, loc *time.Location) string {
	t = t.In(loc)
	if t.Second() != 0 || t.Nanosecond() != 0 {
		return t.Format("Mon 2006-01-02 15:04:05.999999999 MST")
	}
	return t.Format("Mon 2006-01-02 15:04 MST")
}

func objectName(ds *v1alpha1.DeploySchedule) string {
	if ds.Namespace == "" {
		return ds.Name
	}
	return ds.Namespace + "/" + ds.Name
}

func stepText(st schedule.Step, withTarget bool) string {
	text := string(st.Action)
	if withTarget {
		text += " " + st.Target
	}
	switch {
	case st.Action == schedule.ActionStop:
	case st.Replicas != 0:
		text += fmt.Sprintf(" to %d", st.Replicas)
	case st.Action == schedule.ActionScale:
		text += " (unpin)"
	}
	return text
}

func replicasText(n int32) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
