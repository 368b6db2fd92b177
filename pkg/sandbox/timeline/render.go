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

// Render writes the page as one self-contained HTML document: heading,
// legend, the SVG timeline, then the transitions and waiting pods as tables.
func Render(w io.Writer, p Page) error {
	d := newDrawing(p)
	d.head()
	d.legend()
	d.svg()
	d.transitionTable()
	d.waitingTable()
	d.b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, d.b.String())
	return err
}

// drawing is a page being written, with the time scale of its plot.
type drawing struct {
	p    Page
	loc  *time.Location
	span time.Duration
	b    strings.Builder
}

func newDrawing(p Page) *drawing {
	span := p.End.Sub(p.Start)
	if span <= 0 {
		span = time.Second
	}
	return &drawing{p: p, loc: p.Start.Location(), span: span}
}

// x is the horizontal position of t, clamped to the plotted span.
func (d *drawing) x(t time.Time) float64 {
	if t.Before(d.p.Start) {
		t = d.p.Start
	}
	if t.After(d.p.End) {
		t = d.p.End
	}
	return labelW + float64(t.Sub(d.p.Start))/float64(d.span)*plotW
}

// at formats t in the page's zone.
func (d *drawing) at(t time.Time, layout string) string { return esc(t.In(d.loc).Format(layout)) }

func esc(s string) string { return html.EscapeString(s) }

// head writes the document head, its style, the title and the time span.
func (d *drawing) head() {
	p := d.p
	fmt.Fprintf(&d.b, `<!DOCTYPE html>
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
`, esc(p.Title), esc(p.Title), d.at(p.Start, "Mon 2006-01-02 15:04"), d.at(p.End, "Mon 2006-01-02 15:04"), esc(zoneName(p.Start)))
}

// legend writes one colour swatch per workload, in name order.
func (d *drawing) legend() {
	workloads := map[string]bool{}
	for _, r := range d.p.Rows {
		for _, s := range r.Segments {
			workloads[s.Workload] = true
		}
	}
	names := make([]string, 0, len(workloads))
	for n := range workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	d.b.WriteString(`<div class="legend">`)
	for _, n := range names {
		fmt.Fprintf(&d.b, `<span><i style="background:%s"></i>%s</span>`, colour(n), esc(n))
	}
	d.b.WriteString("</div>\n")
}

// svg writes the timeline: windows on top, the time axis, one row per GPU,
// then transitions and checkpoints across the rows.
func (d *drawing) svg() {
	height := topH + len(d.p.Rows)*rowH + 42
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" id="timeline">`+"\n", labelW+plotW+20, height)
	d.windows()
	d.axis()
	for i, r := range d.p.Rows {
		d.row(topH+i*rowH, r)
	}
	d.marks()
	d.b.WriteString("</svg>\n")
}

// windows draws the schedule windows as bands, one line per window label.
func (d *drawing) windows() {
	line := map[string]int{}
	for _, wdw := range d.p.Windows {
		i, seen := line[wdw.Label]
		if !seen {
			i = len(line)
			line[wdw.Label] = i
		}
		y := 4 + (i%3)*14
		fmt.Fprintf(&d.b, `<rect class="window" x="%.1f" y="%d" width="%.1f" height="12" fill="#dde7f3" stroke="#8aa"><title>%s %s – %s</title></rect>`+"\n",
			d.x(wdw.From), y, max(d.x(wdw.To)-d.x(wdw.From), 1), esc(wdw.Label), d.at(wdw.From, "Mon 15:04"), d.at(wdw.To, "Mon 15:04"))
		if !seen {
			fmt.Fprintf(&d.b, `<text x="%d" y="%d" fill="#345">%s</text>`+"\n", 4, y+10, esc(wdw.Label))
		}
	}
}

// axis draws the time ticks and their labels.
func (d *drawing) axis() {
	step := tickStep(d.span)
	for t := firstTick(d.p.Start, step, d.loc); !t.After(d.p.End); t = t.Add(step) {
		fmt.Fprintf(&d.b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>`, d.x(t), d.x(t), topH-8, topH+len(d.p.Rows)*rowH)
		fmt.Fprintf(&d.b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", d.x(t), topH-12, esc(tickLabel(t.In(d.loc), step)))
	}
}

// row draws one GPU at height y: its label, the pods holding it over time
// and its taints.
func (d *drawing) row(y int, r Row) {
	label := fmt.Sprintf("%s/%s %s", r.GPU.Node, r.GPU.Name, r.GPU.Model)
	fmt.Fprintf(&d.b, `<text x="4" y="%d">%s</text>`, y+14, esc(label))
	fmt.Fprintf(&d.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#f7f7f7"/>`, labelW, y+2, plotW, rowH-4)
	for _, s := range r.Segments {
		fmt.Fprintf(&d.b, `<rect class="hold" data-workload="%s" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s (%s) %s – %s</title></rect>`,
			esc(s.Workload), d.x(s.From), y+2, max(d.x(s.To)-d.x(s.From), 1), rowH-4, colour(s.Workload),
			esc(s.Workload), esc(s.Pod), d.at(s.From, "Mon 15:04"), d.at(s.To, "Mon 15:04"))
	}
	if len(r.GPU.Taints) > 0 {
		fmt.Fprintf(&d.b, `<text x="%d" y="%d" fill="#c00">⚠ %s</text>`, labelW+plotW-200, y+14, esc(strings.Join(r.GPU.Taints, ",")))
	}
	d.b.WriteString("\n")
}

// marks draws the transitions and the checkpoints as vertical lines.
func (d *drawing) marks() {
	bottom := topH + len(d.p.Rows)*rowH
	for _, t := range d.p.Transitions {
		fmt.Fprintf(&d.b, `<line class="transition" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#d00" stroke-width="1.5" stroke-dasharray="4,2"><title>transition %s %s</title></line>`+"\n",
			d.x(t.At), d.x(t.At), topH-6, bottom, esc(t.Schedule), d.at(t.At, "Mon 15:04"))
	}
	for i, m := range d.p.Checkpoints {
		fmt.Fprintf(&d.b, `<line class="checkpoint" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#080" stroke-width="1"/><text x="%.1f" y="%d" fill="#080">%s</text>`+"\n",
			d.x(m.At), d.x(m.At), topH, bottom+6+(i%2)*12, d.x(m.At)+2, bottom+18+(i%2)*12, esc(m.Label))
	}
}

// transitionTable lists the transitions and their steps, if any.
func (d *drawing) transitionTable() {
	if len(d.p.Transitions) == 0 {
		return
	}
	d.b.WriteString("<h2>Transitions</h2><table><tr><th>at</th><th>schedule</th><th>steps</th></tr>\n")
	for _, t := range d.p.Transitions {
		var steps []string
		for _, s := range t.Steps {
			steps = append(steps, s.Action+" "+s.Target+" ("+s.Phase+")")
		}
		fmt.Fprintf(&d.b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", d.at(t.At, "Mon 2006-01-02 15:04"), esc(t.Schedule), esc(strings.Join(steps, " → ")))
	}
	d.b.WriteString("</table>\n")
}

// waitingTable lists the pods waiting at the last checkpoint, or says none.
func (d *drawing) waitingTable() {
	d.b.WriteString("<h2>Waiting pods (last checkpoint)</h2>\n")
	if len(d.p.Waiting) == 0 {
		d.b.WriteString("<p>none</p>\n")
		return
	}
	d.b.WriteString("<table><tr><th>pod</th><th>reason</th><th>message</th></tr>\n")
	for _, pod := range d.p.Waiting {
		fmt.Fprintf(&d.b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(pod.Name), esc(pod.Waiting.Reason), esc(pod.Waiting.Message))
	}
	d.b.WriteString("</table>\n")
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
