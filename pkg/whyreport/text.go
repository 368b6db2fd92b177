package whyreport

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/rota-dev/rota/pkg/waits"
)

// TextOptions shape the text output.
type TextOptions struct {
	// Width wraps lines at this many columns.
	Width int
	// Color highlights the verdict; only for a terminal.
	Color bool
}

const (
	ansiReset  = "\x1b[0m"
	ansiYellow = "\x1b[1;33m"
	ansiGreen  = "\x1b[1;32m"
)

// WriteText prints r for a person: the verdict first, then per tier its
// numbers, the notes, and the last decisions, each sentence once.
func WriteText(w io.Writer, r Report, o TextOptions) error {
	p := &printer{w: w, width: o.Width, seen: map[string]bool{}}
	style := ""
	if o.Color {
		style = ansiGreen
		if r.Waiting {
			style = ansiYellow
		}
	}
	p.styled("", r.Verdict, style)
	since := ""
	if !r.Since.IsZero() {
		since = " since " + r.Since.UTC().Format(time.RFC3339)
	}
	p.line(fmt.Sprintf("Pod %s: %s%s", r.Pod, r.Reason, since))
	if r.Reason == string(waits.BindingFailed) && r.Analysis != "" {
		// The cause is the scheduler's error, which only PodScheduled has.
		p.wrapped("Error: ", r.Analysis)
	}
	if len(r.Tiers) > 0 {
		p.line("Tiers:")
		for _, t := range r.Tiers {
			p.hanging("  ", "      ", t.Line())
		}
		for _, n := range r.Notes {
			p.wrapped("Note: ", n)
		}
	}
	if r.Reclaiming != "" {
		p.wrapped("Reclaim: ", r.Reclaiming)
	}
	if len(r.Advice) > 0 {
		// The first (least disruptive) option only, to keep the answer
		// short; -o json lists them all.
		o := r.Advice[0]
		text := string(o.Kind) + ": " + o.Summary
		if n := len(r.Advice) - 1; n > 0 {
			text += fmt.Sprintf(" (%d more option(s): -o json)", n)
		}
		if r.AdviceTruncated {
			text += " (search stopped at its bound: a cheaper move may exist)"
		}
		p.hanging("To admit: ", "          ", text)
	}
	if len(r.PassedOver) > 0 {
		p.line("Passed over:")
		for _, t := range r.PassedOver {
			p.hanging("  ", "    ", t.Line())
		}
	}
	if r.Devices != "" {
		p.wrapped("Devices: ", r.Devices)
	}
	if len(r.Decisions) > 0 {
		p.line("Last decisions (newest first):")
		for _, d := range r.Decisions {
			p.decision(d, r.explained)
		}
	}
	return p.err
}

// printer writes lines and remembers the sentences it printed.
type printer struct {
	w     io.Writer
	width int
	seen  map[string]bool
	err   error
}

func (p *printer) line(s string) {
	if p.err == nil {
		_, p.err = fmt.Fprintln(p.w, s)
	}
}

// mark records every sentence of text as said.
func (p *printer) mark(text string) {
	for _, s := range Sentences(text) {
		for _, k := range keys(s) {
			p.seen[k] = true
		}
	}
}

// unsaid returns the sentences of text not printed yet, joined with "; ".
func (p *printer) unsaid(text string) string {
	var out []string
	for _, s := range Sentences(text) {
		said := false
		for _, k := range keys(s) {
			said = said || p.seen[k]
		}
		if !said {
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}

// label matches a label before a sentence: a word ("Waiting: ",
// "QuotaExceeded: "), after a decision's time and before its count.
var label = regexp.MustCompile(`^(\d\d:\d\d:\d\d )?[A-Za-z]+( \(×\d+\))?: `)

// keys are what a sentence says: itself and, when it starts with a label,
// what follows the label. A tier's name ("1/2 H100: ...") is no label: two
// tiers with the same numbers say different things.
func keys(s string) []string {
	out := []string{s}
	if loc := label.FindStringIndex(s); loc != nil && len(s)-loc[1] >= minRepeated {
		out = append(out, strings.TrimSpace(s[loc[1]:]))
	}
	return out
}

// decision prints one decision: what it adds to what was said. When
// Rota's condition explains the wait, a FailedScheduling event is cut to
// the filters' tally ("0/2 nodes are available: 2 ..."): the text after it
// is Rota's plugins' explanation, which the lines above already give.
func (p *printer) decision(d Event, explained bool) {
	msg := d.Message
	if explained && d.Reason == "FailedScheduling" {
		if i := strings.Index(msg, ". "); i >= 0 {
			msg = msg[:i+1]
		}
	}
	label := fmt.Sprintf("  %s %s", d.Time.UTC().Format("15:04:05"), d.Reason)
	if d.Count > 1 {
		label += fmt.Sprintf(" (×%d)", d.Count)
	}
	rest := p.unsaid(msg)
	if rest == "" {
		p.line(label + ": as above")
		return
	}
	p.mark(msg)
	p.wrapped(label+": ", rest)
}

// styled prints text like wrapped, each line in the ANSI style, if any.
func (p *printer) styled(label, text, style string) {
	if style == "" {
		p.wrapped(label, text)
		return
	}
	p.mark(text)
	for _, line := range wrap(text, p.width-len([]rune(label))) {
		p.line(label + style + line + ansiReset)
	}
}

// wrapped prints text after label, wrapped at the width and indented
// under the label.
func (p *printer) wrapped(label, text string) {
	p.hanging(label, strings.Repeat(" ", len([]rune(label))), text)
	if strings.TrimSpace(text) == "" {
		p.line(label)
	}
}

// hanging prints text after label, wrapped at the width, its later lines
// after indent.
func (p *printer) hanging(label, indent, text string) {
	p.mark(text)
	width := p.width - max(len([]rune(label)), len([]rune(indent)))
	prefix := label
	for _, line := range wrap(text, width) {
		p.line(prefix + line)
		prefix = indent
	}
}

// Sentences splits text into its sentences: parts separated by "; " or
// ". ", trimmed, without a final period.
func Sentences(text string) []string {
	var out []string
	for _, part := range strings.Split(text, "; ") {
		for _, s := range strings.Split(part, ". ") {
			s = strings.TrimSuffix(strings.TrimSpace(s), ".")
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// wrap breaks s into lines of at most width runes at spaces; a word
// longer than width gets a line of its own.
func wrap(s string, width int) []string {
	var lines []string
	var cur strings.Builder
	n := 0
	for _, word := range strings.Fields(s) {
		wl := len([]rune(word))
		if n > 0 && n+1+wl > width {
			lines = append(lines, cur.String())
			cur.Reset()
			n = 0
		}
		if n > 0 {
			cur.WriteByte(' ')
			n++
		}
		cur.WriteString(word)
		n += wl
	}
	if n > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// minRepeated is the length from which a sentence said twice counts as
// repeated; shorter ones ("as above", a bare reason) may recur.
const minRepeated = 20

// Repeated returns the first sentence of out (of 20 or more characters)
// that appears twice in it, with or without a label before it ("Message:
// ..."), or "". A sentence is a line's part between "; " or ". "; wrapped
// lines are compared piece by piece.
func Repeated(out string) string {
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		for _, s := range Sentences(line) {
			ks := keys(s)
			for _, k := range ks {
				if len(k) >= minRepeated && seen[k] {
					return k
				}
			}
			for _, k := range ks {
				seen[k] = true
			}
		}
	}
	return ""
}
