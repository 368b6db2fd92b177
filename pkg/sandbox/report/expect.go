package report

import (
	"fmt"
	"maps"
	"path"
	"slices"
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
	var f failures
	for _, d := range h.DoubleBooked {
		f.add("%s", d)
	}
	for _, pe := range exp.Pods {
		f.checkPods(pe, st.Pods)
	}
	for _, te := range exp.Targets {
		f.checkTarget(te, st.Targets)
	}
	for _, re := range exp.Reservations {
		f.checkReservation(re, st.Reservations)
	}
	for _, qe := range exp.Quotas {
		f.checkQuota(qe, st.Quotas)
	}
	for _, ee := range exp.Events {
		f.checkEvent(ee, st.Events)
	}
	f.checkHistory(exp, h)
	return f
}

// failures collects the sentences of the expectations that do not hold.
type failures []string

func (f *failures) add(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

// checkPods checks how many pods (not terminating) match pe's name pattern,
// then each of them.
func (f *failures) checkPods(pe scenario.PodExpect, pods []Pod) {
	var matched []Pod
	for _, p := range pods {
		if ok, _ := path.Match(pe.Name, p.Name); ok && p.Phase != "Terminating" {
			matched = append(matched, p)
		}
	}
	if pe.Count != nil && len(matched) != *pe.Count {
		f.add("pods %s: %d match, want %d", pe.Name, len(matched), *pe.Count)
	}
	if pe.Count == nil && len(matched) == 0 {
		f.add("pods %s: none", pe.Name)
	}
	for _, p := range matched {
		f.checkPod(pe, p)
	}
}

// checkPod checks one matching pod's phase, node and GPUs, then whether and
// why it waits.
func (f *failures) checkPod(pe scenario.PodExpect, p Pod) {
	if pe.Phase != "" && p.Phase != pe.Phase {
		f.add("pod %s: phase %s, want %s", p.Name, p.Phase, pe.Phase)
	}
	if pe.Node != "" && p.Node != pe.Node {
		f.add("pod %s: on node %q, want %q", p.Name, p.Node, pe.Node)
	}
	if pe.GPUs != nil && len(p.Devices) != *pe.GPUs {
		f.add("pod %s: holds %d GPUs, want %d", p.Name, len(p.Devices), *pe.GPUs)
	}
	if pe.Model != "" {
		if len(p.Devices) == 0 {
			f.add("pod %s: holds no GPU, want %s", p.Name, pe.Model)
		}
		for _, d := range p.Devices {
			if d.Model != pe.Model {
				f.add("pod %s: holds %s %s (%s), want %s", p.Name, d.Node, d.Name, d.Model, pe.Model)
			}
		}
	}
	f.checkAnnotations(pe, p)
	f.checkWaiting(pe, p)
}

// checkAnnotations checks a matching pod's annotations: each expected
// value's glob matches, or the annotation is absent where "" is expected.
func (f *failures) checkAnnotations(pe scenario.PodExpect, p Pod) {
	for _, key := range slices.Sorted(maps.Keys(pe.Annotations)) {
		want := pe.Annotations[key]
		got, ok := p.Annotations[key]
		switch {
		case want == "" && ok:
			f.add("pod %s: annotation %s is %q, want none", p.Name, key, got)
		case want != "" && !ok:
			f.add("pod %s: no annotation %s, want %q", p.Name, key, want)
		case want != "":
			if match, _ := path.Match(want, got); !match {
				f.add("pod %s: annotation %s is %q, want %q", p.Name, key, got, want)
			}
		}
	}
}

// checkEvent checks that an Event about the pod has the reason and
// message expected.
func (f *failures) checkEvent(ee scenario.EventExpect, events []PodEvent) {
	var seen []string
	for _, e := range events {
		if e.Pod != ee.Pod || e.Reason != ee.Reason {
			continue
		}
		if strings.Contains(e.Note, ee.MessageContains) {
			return
		}
		seen = append(seen, e.Note)
	}
	if len(seen) == 0 {
		f.add("pod %s: no %s Event", ee.Pod, ee.Reason)
		return
	}
	f.add("pod %s: no %s Event mentions %q (%s)", ee.Pod, ee.Reason, ee.MessageContains, strings.Join(seen, "; "))
}

// checkWaiting checks that a pod expected to wait does, with the reason
// code and text expected.
func (f *failures) checkWaiting(pe scenario.PodExpect, p Pod) {
	if pe.Waiting && p.Waiting == nil {
		f.add("pod %s: placed on %s, want it waiting", p.Name, p.Node)
	}
	if pe.WaitReason != "" && (p.Waiting == nil || p.Waiting.Code != pe.WaitReason) {
		f.add("pod %s: waits with reason code %q, want %s (%s)", p.Name, waitingCode(p.Waiting), pe.WaitReason, waitingText(p.Waiting))
	}
	if pe.ReasonContains != "" {
		if p.Waiting == nil || !strings.Contains(p.Waiting.Reason+" "+p.Waiting.Message, pe.ReasonContains) {
			f.add("pod %s: reason does not mention %q (%s)", p.Name, pe.ReasonContains, waitingText(p.Waiting))
		}
	}
	if pe.AdviceContains != "" {
		if text := adviceText(p.Waiting); !strings.Contains(text, pe.AdviceContains) {
			f.add("pod %s: advice does not mention %q (%s)", p.Name, pe.AdviceContains, text)
		}
	}
}

// adviceText renders a waiting pod's advice as "<kind>: <summary>" lines.
func adviceText(w *Waiting) string {
	if w == nil || len(w.Advice) == 0 {
		return "no advice"
	}
	var lines []string
	for _, o := range w.Advice {
		lines = append(lines, string(o.Kind)+": "+o.Summary)
	}
	return strings.Join(lines, "\n")
}

// checkTarget checks the status of one schedule target (the last one listed
// under its name).
func (f *failures) checkTarget(te scenario.TargetExpect, targets []Target) {
	var found *Target
	for i, t := range targets {
		if t.Schedule == te.Schedule && t.Target == te.Target {
			found = &targets[i]
		}
	}
	switch {
	case found == nil:
		f.add("schedule %s target %s: no status", te.Schedule, te.Target)
	case te.Phase != "" && found.Phase != te.Phase:
		f.add("schedule %s target %s: phase %s (%s), want %s", te.Schedule, te.Target, found.Phase, found.Reason, te.Phase)
	case te.Reason != "" && found.Reason != te.Reason:
		f.add("schedule %s target %s: reason %s, want %s", te.Schedule, te.Target, found.Reason, te.Reason)
	}
}

// checkReservation checks one reservation's phase and VRAM budget use (the
// last one listed under its name).
func (f *failures) checkReservation(re scenario.ReservationExpect, reservations []Reservation) {
	var found *Reservation
	for i, r := range reservations {
		if r.Name == re.Name {
			found = &reservations[i]
		}
	}
	switch {
	case found == nil:
		f.add("reservation %s: not found", re.Name)
	case re.Phase != "" && found.Phase != re.Phase:
		f.add("reservation %s: phase %s, want %s", re.Name, found.Phase, re.Phase)
	case re.MaxBudgetUsedMiB != nil && found.BudgetUsedMiB > *re.MaxBudgetUsedMiB:
		f.add("reservation %s: %d MiB used, want at most %d", re.Name, found.BudgetUsedMiB, *re.MaxBudgetUsedMiB)
	}
}

// checkQuota checks one GPUQuota's GuaranteesFit condition.
func (f *failures) checkQuota(qe scenario.QuotaExpect, quotas []Quota) {
	var found *Quota
	for i, q := range quotas {
		if q.Name == qe.Name {
			found = &quotas[i]
		}
	}
	switch {
	case found == nil:
		f.add("GPUQuota %s: not found", qe.Name)
	case qe.GuaranteesFit != "" && found.GuaranteesFit != qe.GuaranteesFit:
		f.add("GPUQuota %s: GuaranteesFit %q (%s: %s), want %s", qe.Name, found.GuaranteesFit, found.Reason, found.Message, qe.GuaranteesFit)
	case qe.Reason != "" && found.Reason != qe.Reason:
		f.add("GPUQuota %s: GuaranteesFit reason %q, want %s", qe.Name, found.Reason, qe.Reason)
	case !strings.Contains(found.Message, qe.MessageContains):
		f.add("GPUQuota %s: GuaranteesFit message does not mention %q (%s)", qe.Name, qe.MessageContains, found.Message)
	}
}

// checkHistory checks what the run saw up to the checkpoint: transitions,
// the most GPUs in use, the fewest Ready pods per workload.
func (f *failures) checkHistory(exp scenario.Expect, h History) {
	if exp.Transitions != nil && h.Transitions != *exp.Transitions {
		f.add("%d transitions so far, want %d", h.Transitions, *exp.Transitions)
	}
	if exp.MaxGPUsInUse != nil && h.MaxGPUsInUse > *exp.MaxGPUsInUse {
		f.add("%d GPUs were in use at once, want at most %d", h.MaxGPUsInUse, *exp.MaxGPUsInUse)
	}
	for _, m := range exp.MinReady {
		if got := h.MinReady[m.Workload]; got < m.Count {
			f.add("workload %s had %d Ready pods at one point since the previous checkpoint, want at least %d", m.Workload, got, m.Count)
		}
	}
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
