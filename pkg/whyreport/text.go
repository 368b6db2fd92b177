package whyreport

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText prints r for a person, each line wrapped at width columns.
func WriteText(w io.Writer, r Report, width int) error {
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
