package timeline

import (
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/rota-dev/rota/pkg/sandbox/report"
)

// Band is a schedule window active over [From, To).
type Band struct {
	Label    string
	From, To time.Time
}

// Mark is a named instant (a checkpoint).
type Mark struct {
	Label string
	At    time.Time
}

// Page is everything drawn.
type Page struct {
	Title       string
	Start, End  time.Time
	Rows        []Row
	Windows     []Band
	Transitions []report.Transition
	Checkpoints []Mark
	// Waiting are the pods waiting at the last checkpoint.
	Waiting []report.Pod
}

const (
	labelW = 230
	plotW  = 1100
	rowH   = 20
	topH   = 70
)

var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#2f4b7c", "#a05195"}

func colour(workload string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(workload))
	return palette[h.Sum32()%uint32(len(palette))]
}

// Render writes the page as one self-contained HTML document.
func Render(w io.Writer, p Page) error {
	loc := p.Start.Location()
	span := p.End.Sub(p.Start)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		if t.Before(p.Start) {
			t = p.Start
		}
		if t.After(p.End) {
			t = p.End
		}
		return labelW + float64(t.Sub(p.Start))/float64(span)*plotW
	}
	esc := html.EscapeString
	height := topH + len(p.Rows)*rowH + 42
	var b strings.Builder
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>
body{font-family:sans-serif;margin:16px;color:#222}
h1{font-size:18px} h2{font-size:15px;margin-top:20px}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
svg text{font-size:11px}
</style></head><body>
<h1>%s</h1>
<p>%s → %s (simulated time, %s)</p>
`, esc(p.Title), esc(p.Title), esc(p.Start.In(loc).Format("Mon 2006-01-02 15:04")), esc(p.End.In(loc).Format("Mon 2006-01-02 15:04")), esc(zoneName(p.Start)))

	// Legend.
	workloads := map[string]bool{}
	for _, r := range p.Rows {
		for _, s := range r.Segments {
			workloads[s.Workload] = true
		}
	}
	names := make([]string, 0, len(workloads))
	for n := range workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteString(`<div class="legend">`)
	for _, n := range names {
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s</span>`, colour(n), esc(n))
	}
	b.WriteString("</div>\n")

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" id="timeline">`+"\n", labelW+plotW+20, height)
	// Windows as bands on top, one line per window.
	line := map[string]int{}
	for _, wdw := range p.Windows {
		i, seen := line[wdw.Label]
		if !seen {
			i = len(line)
			line[wdw.Label] = i
		}
		y := 4 + (i%3)*14
		fmt.Fprintf(&b, `<rect class="window" x="%.1f" y="%d" width="%.1f" height="12" fill="#dde7f3" stroke="#8aa"><title>%s %s – %s</title></rect>`+"\n",
			x(wdw.From), y, max(x(wdw.To)-x(wdw.From), 1), esc(wdw.Label), esc(wdw.From.In(loc).Format("Mon 15:04")), esc(wdw.To.In(loc).Format("Mon 15:04")))
		if !seen {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#345">%s</text>`+"\n", 4, y+10, esc(wdw.Label))
		}
	}
	// Time axis.
	step := tickStep(span)
	for t := firstTick(p.Start, step, loc); !t.After(p.End); t = t.Add(step) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>`, x(t), x(t), topH-8, topH+len(p.Rows)*rowH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(t), topH-12, esc(tickLabel(t.In(loc), step)))
	}
	// GPU rows.
	for i, r := range p.Rows {
		y := topH + i*rowH
		label := fmt.Sprintf("%s/%s %s", r.GPU.Node, r.GPU.Name, r.GPU.Model)
		fmt.Fprintf(&b, `<text x="4" y="%d">%s</text>`, y+14, esc(label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#f7f7f7"/>`, labelW, y+2, plotW, rowH-4)
		for _, s := range r.Segments {
			fmt.Fprintf(&b, `<rect class="hold" data-workload="%s" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s (%s) %s – %s</title></rect>`,
				esc(s.Workload), x(s.From), y+2, max(x(s.To)-x(s.From), 1), rowH-4, colour(s.Workload),
				esc(s.Workload), esc(s.Pod), esc(s.From.In(loc).Format("Mon 15:04")), esc(s.To.In(loc).Format("Mon 15:04")))
		}
		if len(r.GPU.Taints) > 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#c00">⚠ %s</text>`, labelW+plotW-200, y+14, esc(strings.Join(r.GPU.Taints, ",")))
		}
		b.WriteString("\n")
	}
	bottom := topH + len(p.Rows)*rowH
	// Transitions and checkpoints.
	for _, t := range p.Transitions {
		fmt.Fprintf(&b, `<line class="transition" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#d00" stroke-width="1.5" stroke-dasharray="4,2"><title>transition %s %s</title></line>`+"\n",
			x(t.At), x(t.At), topH-6, bottom, esc(t.Schedule), esc(t.At.In(loc).Format("Mon 15:04")))
	}
	for i, m := range p.Checkpoints {
		fmt.Fprintf(&b, `<line class="checkpoint" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#080" stroke-width="1"/><text x="%.1f" y="%d" fill="#080">%s</text>`+"\n",
			x(m.At), x(m.At), topH, bottom+6+(i%2)*12, x(m.At)+2, bottom+18+(i%2)*12, esc(m.Label))
	}
	b.WriteString("</svg>\n")

	if len(p.Transitions) > 0 {
		b.WriteString("<h2>Transitions</h2><table><tr><th>at</th><th>schedule</th><th>steps</th></tr>\n")
		for _, t := range p.Transitions {
			var steps []string
			for _, s := range t.Steps {
				steps = append(steps, s.Action+" "+s.Target+" ("+s.Phase+")")
			}
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(t.At.In(loc).Format("Mon 2006-01-02 15:04")), esc(t.Schedule), esc(strings.Join(steps, " → ")))
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("<h2>Waiting pods (last checkpoint)</h2>\n")
	if len(p.Waiting) == 0 {
		b.WriteString("<p>none</p>\n")
	} else {
		b.WriteString("<table><tr><th>pod</th><th>reason</th><th>message</th></tr>\n")
		for _, pod := range p.Waiting {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(pod.Name), esc(pod.Waiting.Reason), esc(pod.Waiting.Message))
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// zoneName is the zone's name, or its UTC offset for a fixed offset.
func zoneName(t time.Time) string {
	if name := t.Location().String(); name != "" {
		return name
	}
	return "UTC" + t.Format("-07:00")
}

func tickStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour} {
		if span/s <= 28 {
			return s
		}
	}
	return 48 * time.Hour
}

func firstTick(start time.Time, step time.Duration, loc *time.Location) time.Time {
	l := start.In(loc)
	day := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
	t := day
	for t.Before(start) {
		t = t.Add(step)
	}
	return t
}

func tickLabel(t time.Time, step time.Duration) string {
	switch {
	case step >= 24*time.Hour:
		return t.Format("Mon 02")
	case t.Hour() == 0 && t.Minute() == 0:
		return t.Format("Mon 02")
	default:
		return t.Format("15:04")
	}
}
