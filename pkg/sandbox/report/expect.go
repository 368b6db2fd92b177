package report

import (
	"fmt"
	"path"
	"strings"

	"github.com/rota-dev/rota/pkg/sandbox/scenario"
)

// History is what a run saw before a checkpoint, beyond its state.
type History struct {
	// Transitions is the number of schedule transitions since the start.
	Transitions int
	// MaxGPUsInUse is the most GPUs allocated at one sample since the start.
	MaxGPUsInUse int
	// MinReady is, per workload, the fewest Ready pods at any sample since
	// the previous checkpoint; a workload missing from a sample counts 0.
	MinReady map[string]int
	// DoubleBooked are the double bookings seen at any sample since the
	// previous checkpoint.
	DoubleBooked []string
}

// Check returns the expectations that do not hold, one sentence each. A
// double-booked GPU fails every checkpoint, expected or not.
func Check(exp scenario.Expect, st *State, h History) []string {
	var out []string
	fail := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, d := range h.DoubleBooked {
		fail("%s", d)
	}
	for _, pe := range exp.Pods {
		var matched []Pod
		for _, p := range st.Pods {
			if ok, _ := path.Match(pe.Name, p.Name); ok && p.Phase != "Terminating" {
				matched = append(matched, p)
			}
		}
		if pe.Count != nil && len(matched) != *pe.Count {
			fail("pods %s: %d match, want %d", pe.Name, len(matched), *pe.Count)
		}
		if pe.Count == nil && len(matched) == 0 {
			fail("pods %s: none", pe.Name)
		}
		for _, p := range matched {
			if pe.Phase != "" && p.Phase != pe.Phase {
				fail("pod %s: phase %s, want %s", p.Name, p.Phase, pe.Phase)
			}
			if pe.Node != "" && p.Node != pe.Node {
				fail("pod %s: on node %q, want %q", p.Name, p.Node, pe.Node)
			}
			if pe.GPUs != nil && len(p.Devices) != *pe.GPUs {
				fail("pod %s: holds %d GPUs, want %d", p.Name, len(p.Devices), *pe.GPUs)
			}
			if pe.Model != "" {
				if len(p.Devices) == 0 {
					fail("pod %s: holds no GPU, want %s", p.Name, pe.Model)
				}
				for _, d := range p.Devices {
					if d.Model != pe.Model {
						fail("pod %s: holds %s %s (%s), want %s", p.Name, d.Node, d.Name, d.Model, pe.Model)
					}
				}
			}
			if pe.Waiting && p.Waiting == nil {
				fail("pod %s: placed on %s, want it waiting", p.Name, p.Node)
			}
			if pe.WaitReason != "" && (p.Waiting == nil || p.Waiting.Code != pe.WaitReason) {
				fail("pod %s: waits with reason code %q, want %s (%s)", p.Name, waitingCode(p.Waiting), pe.WaitReason, waitingText(p.Waiting))
			}
			if pe.ReasonContains != "" {
				if p.Waiting == nil || !strings.Contains(p.Waiting.Reason+" "+p.Waiting.Message, pe.ReasonContains) {
					fail("pod %s: reason does not mention %q (%s)", p.Name, pe.ReasonContains, waitingText(p.Waiting))
				}
			}
		}
	}
	for _, te := range exp.Targets {
		var found *Target
		for i, t := range st.Targets {
			if t.Schedule == te.Schedule && t.Target == te.Target {
				found = &st.Targets[i]
			}
		}
		switch {
		case found == nil:
			fail("schedule %s target %s: no status", te.Schedule, te.Target)
		case te.Phase != "" && found.Phase != te.Phase:
			fail("schedule %s target %s: phase %s (%s), want %s", te.Schedule, te.Target, found.Phase, found.Reason, te.Phase)
		case te.Reason != "" && found.Reason != te.Reason:
			fail("schedule %s target %s: reason %s, want %s", te.Schedule, te.Target, found.Reason, te.Reason)
		}
	}
	for _, re := range exp.Reservations {
		var found *Reservation
		for i, r := range st.Reservations {
			if r.Name == re.Name {
				found = &st.Reservations[i]
			}
		}
		switch {
		case found == nil:
			fail("reservation %s: not found", re.Name)
		case re.Phase != "" && found.Phase != re.Phase:
			fail("reservation %s: phase %s, want %s", re.Name, found.Phase, re.Phase)
		case re.MaxBudgetUsedMiB != nil && found.BudgetUsedMiB > *re.MaxBudgetUsedMiB:
			fail("reservation %s: %d MiB used, want at most %d", re.Name, found.BudgetUsedMiB, *re.MaxBudgetUsedMiB)
		}
	}
	if exp.Transitions != nil && h.Transitions != *exp.Transitions {
		fail("%d transitions so far, want %d", h.Transitions, *exp.Transitions)
	}
	if exp.MaxGPUsInUse != nil && h.MaxGPUsInUse > *exp.MaxGPUsInUse {
		fail("%d GPUs were in use at once, want at most %d", h.MaxGPUsInUse, *exp.MaxGPUsInUse)
	}
	for _, m := range exp.MinReady {
		if got := h.MinReady[m.Workload]; got < m.Count {
			fail("workload %s had %d Ready pods at one point since the previous checkpoint, want at least %d", m.Workload, got, m.Count)
		}
	}
	return out
}

func waitingCode(w *Waiting) string {
	if w == nil {
		return ""
	}
	return w.Code
}

func waitingText(w *Waiting) string {
	if w == nil {
		return "not waiting"
	}
	return w.Reason + ": " + w.Message
}
