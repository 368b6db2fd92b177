package defrag

import (
	"fmt"
	"io"
	"strings"

	"github.com/rota-dev/rota/pkg/advisor"
)

// WriteText writes the plan for people: a summary line, then each unit in
// the order it is planned, with its moves and their cost.
func WriteText(w io.Writer, p *Plan) error {
	var b strings.Builder
	if p.Waiting() == 0 {
		b.WriteString("Nothing waiting: no pod waits for GPUs, no move is needed.\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	count := map[string]int{}
	for _, u := range p.Units {
		count[u.Outcome]++
	}
	fmt.Fprintf(&b, "%d waiting: %d admitted by moves, %d fit without one, %d blocked; %s to evict, one workload at a time.\n",
		p.Waiting(), count[advisor.OutcomeMove], count[advisor.OutcomeFits], count[advisor.OutcomeBlocked]+len(p.Skipped), plural(len(p.Evictions), "pod"))
	for i, u := range p.Units {
		fmt.Fprintf(&b, "\n%d. %s (%s; priority %d): ", i+1, u.Workload, strings.Join(u.Pods, ", "), u.Priority)
		switch u.Outcome {
		case advisor.OutcomeFits:
			fmt.Fprintf(&b, "fits without a move once the steps above are done → %s\n", nodes(u.Placement))
		case advisor.OutcomeBlocked:
			fmt.Fprintf(&b, "no move admits it — %s\n", u.Reason)
		case advisor.OutcomeMove:
			m := u.Move
			fmt.Fprintf(&b, "move → lands on %s\n", nodes(u.Placement))
			fmt.Fprintf(&b, "   cost: %s disturbed, highest priority %d, %s\n", plural(m.GPUs, "GPU"), m.MaxPriority, plural(m.Tenants, "tenant"))
			for j, st := range m.Steps {
				fmt.Fprintf(&b, "   %d.%d %s\n", i+1, j+1, stepText(st))
			}
		}
		if u.Truncated {
			b.WriteString("   (search stopped at its bound: a cheaper move may exist)\n")
		}
	}
	for _, s := range p.Skipped {
		fmt.Fprintf(&b, "\nleft out: %s\n", s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func stepText(st advisor.Step) string {
	var s string
	if st.Action == "move" {
		s = fmt.Sprintf("evict %s (%d × %s) from %s; its replacement should fit on %s", st.Workload, st.GPUs, st.Model,
			strings.Join(st.From, ","), strings.Join(st.To, ","))
	} else {
		s = fmt.Sprintf("evict %s (%d × %s) on %s (%s)", st.Workload, st.GPUs, st.Model, strings.Join(st.From, ","), st.Why)
	}
	if len(st.Pods) > 1 || (len(st.Pods) == 1 && st.Pods[0] != st.Workload) {
		s += "; pods " + strings.Join(st.Pods, ", ")
	}
	if st.Budget != "" {
		s += "; uses " + st.Budget
	}
	return s
}

func nodes(ps []advisor.Placed) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s (%d × %s)", p.Node, len(p.Devices), p.Model))
	}
	return strings.Join(out, ", ")
}

// plural is "1 pod", "2 pods".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
