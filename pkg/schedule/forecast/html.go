package forecast

import (
	"fmt"
	"html"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Colours of the page; the screenshot test finds the plot by them.
const (
	colourDemand = "#4e79a7"
	colourOver   = "#d62728"
	colourBand   = "#dde7f3"
)

const (
	plotLabelW = 230
	plotW      = 1100
	plotH      = 160
	bandH      = 14
)

// WriteHTML writes the forecast as one self-contained page, times in loc:
// per model, its demand over time against its capacity (the part over
// capacity in red), the schedule windows as bands above it and the
// transitions as dashed lines; then the over-committed windows and the
// transitions as tables. It draws in the style of the sandbox's timeline.
func WriteHTML(w io.Writer, f *Forecast, loc *time.Location, title string) error {
	p := &page{f: f, loc: loc, span: f.To.Sub(f.From)}
	fmt.Fprintf(&p.b, `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>
body{font-family:sans-serif;margin:16px;color:#222}
h1{font-size:18px} h2{font-size:15px;margin-top:20px}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
.over{color:%s;font-weight:bold}
svg text{font-size:11px}
</style></head><body>
<h1>%s</h1>
<p>%s → %s (%s)</p>
`, esc(title), colourOver, esc(title), p.at(f.From, "Mon 2006-01-02 15:04"), p.at(f.To, "Mon 2006-01-02 15:04"), esc(loc.String()))
	for _, m := range f.Models {
		p.model(m)
	}
	p.overcommitTable()
	p.fallbackTable()
	p.warningTable()
	p.transitionTable()
	p.b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, p.b.String())
	return err
}

type page struct {
	f    *Forecast
	loc  *time.Location
	span time.Duration
	b    strings.Builder
}

func esc(s string) string { return html.EscapeString(s) }

func (p *page) at(t time.Time, layout string) string { return esc(t.In(p.loc).Format(layout)) }

func (p *page) x(t time.Time) float64 {
	if t.Before(p.f.From) {
		t = p.f.From
	}
	if t.After(p.f.To) {
		t = p.f.To
	}
	return plotLabelW + float64(t.Sub(p.f.From))/float64(p.span)*plotW
}

// model draws one model's panel.
func (p *page) model(m string) {
	capacity := p.f.Capacity[m]
	series := p.f.Series(m)
	top := capacity
	for _, pt := range series {
		top = max(top, pt.Demand)
	}
	top++
	bands := p.bandRows()
	y0 := len(bands)*bandH + 24 // top of the plot
	y := func(n int) float64 { return float64(y0) + float64(plotH)*(1-float64(n)/float64(top)) }
	fmt.Fprintf(&p.b, "<h2>%s: demand against %d healthy, unreserved GPUs</h2>\n", esc(ModelLabel(m)), capacity)
	fmt.Fprintf(&p.b, `<svg xmlns="http://www.w3.org/2000/svg" class="model" data-model="%s" width="%d" height="%d">`+"\n",
		esc(m), plotLabelW+plotW+20, y0+plotH+30)
	for i, row := range bands {
		by := 4 + i*bandH
		fmt.Fprintf(&p.b, `<text x="4" y="%d" fill="#345">%s</text>`+"\n", by+10, esc(row[0].Schedule+" "+row[0].Name))
		for _, wdw := range row {
			fmt.Fprintf(&p.b, `<rect class="window" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#8aa"><title>%s %s – %s</title></rect>`+"\n",
				p.x(wdw.From), by, max(p.x(wdw.To)-p.x(wdw.From), 1), bandH-2, colourBand, esc(wdw.Name), p.at(wdw.From, "Mon 15:04"), p.at(wdw.To, "Mon 15:04"))
		}
	}
	p.axis(y0, y(0))
	for _, pt := range series {
		x0, x1 := p.x(pt.From), p.x(pt.To)
		under := min(pt.Demand, capacity)
		tip := fmt.Sprintf("%s – %s: %d of %d (%s)", p.at(pt.From, "Mon 15:04"), p.at(pt.To, "Mon 15:04"), pt.Demand, capacity, esc(strings.Join(pt.Loads, ", ")))
		fmt.Fprintf(&p.b, `<rect class="demand" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
			x0, y(under), max(x1-x0, 1), y(0)-y(under), colourDemand, tip)
		if pt.Demand > capacity {
			fmt.Fprintf(&p.b, `<rect class="overcommit" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>over-committed %s</title></rect>`+"\n",
				x0, y(pt.Demand), max(x1-x0, 1), y(capacity)-y(pt.Demand), colourOver, tip)
		}
	}
	labelled := false
	for _, oc := range p.f.Overcommits {
		if oc.Model == m && oc.Reason == ReasonFragmentation {
			if !labelled {
				fmt.Fprintf(&p.b, `<text x="4" y="%.1f" fill="%s">does not pack per node</text>`+"\n", y(0)+8, colourOver)
				labelled = true
			}
			fmt.Fprintf(&p.b, `<rect class="overcommit fragmentation" x="%.1f" y="%.1f" width="%.1f" height="6" fill="%s"><title>%s</title></rect>`+"\n",
				p.x(oc.From), y(0)+2, max(p.x(oc.To)-p.x(oc.From), 1), colourOver, esc(oc.Detail))
		}
	}
	fmt.Fprintf(&p.b, `<line class="capacity" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#222" stroke-width="2"/><text x="4" y="%.1f">capacity %d</text>`+"\n",
		plotLabelW, plotLabelW+plotW, y(capacity), y(capacity), y(capacity)+4, capacity)
	p.transitionMarks(m, y0, y(0))
	p.b.WriteString("</svg>\n")
}

// bandRows groups the windows by schedule and name, one row each.
func (p *page) bandRows() [][]Window {
	index := map[string]int{}
	var rows [][]Window
	for _, w := range p.f.Windows {
		k := w.Schedule + "\x00" + w.Name
		i, ok := index[k]
		if !ok {
			i = len(rows)
			index[k] = i
			rows = append(rows, nil)
		}
		rows[i] = append(rows[i], w)
	}
	return rows
}

// axis draws the time ticks over the plot.
func (p *page) axis(top int, bottom float64) {
	step := tickStep(p.span)
	for t := firstTick(p.f.From, step, p.loc); !t.After(p.f.To); t = t.Add(step) {
		fmt.Fprintf(&p.b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n",
			p.x(t), p.x(t), top, bottom, p.x(t), bottom+14, esc(tickLabel(t.In(p.loc), step)))
	}
}

// transitionMarks draws the transitions that touch model m; one whose peak
// exceeds the capacity is drawn in red.
func (p *page) transitionMarks(m string, top int, bottom float64) {
	for _, tr := range p.f.Transitions {
		if _, ok := tr.Peak[m]; !ok {
			continue
		}
		colour := "#555"
		if tr.Peak[m] > p.f.Capacity[m] {
			colour = colourOver
		}
		fmt.Fprintf(&p.b, `<line class="transition" x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="4,2"><title>%s %s: %d → peak %d → %d</title></line>`+"\n",
			p.x(tr.At), p.x(tr.At), top, bottom, colour, esc(tr.Schedule), p.at(tr.At, "Mon 15:04"), tr.Before[m], tr.Peak[m], tr.After[m])
	}
}

func (p *page) overcommitTable() {
	p.b.WriteString("<h2>Over-committed windows</h2>\n")
	if len(p.f.Overcommits) == 0 {
		p.b.WriteString("<p>none: every window fits the pool by count and per node</p>\n")
		return
	}
	p.b.WriteString("<table><tr><th>from</th><th>to</th><th>model</th><th>demand / capacity</th><th>reason</th><th>targets</th><th>also running</th><th>detail</th></tr>\n")
	for _, oc := range p.f.Overcommits {
		fmt.Fprintf(&p.b, `<tr class="over"><td>%s</td><td>%s</td><td>%s</td><td>%d / %d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`+"\n",
			p.at(oc.From, "Mon 2006-01-02 15:04"), p.at(oc.To, "Mon 2006-01-02 15:04"), esc(ModelLabel(oc.Model)), oc.Demand, oc.Capacity,
			esc(oc.Reason), esc(strings.Join(oc.Targets, ", ")), esc(strings.Join(oc.Others, ", ")), esc(oc.Detail))
	}
	p.b.WriteString("</table>\n")
}

func (p *page) fallbackTable() {
	if len(p.f.Fallbacks) == 0 {
		return
	}
	p.b.WriteString("<h2>On a fallback model</h2><table><tr><th>from</th><th>to</th><th>workload</th><th>GPUs</th></tr>\n")
	for _, fb := range p.f.Fallbacks {
		fmt.Fprintf(&p.b, `<tr class="fallback"><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`+"\n",
			p.at(fb.From, "Mon 2006-01-02 15:04"), p.at(fb.To, "Mon 2006-01-02 15:04"), esc(fb.Load), esc(fb.Text()))
	}
	p.b.WriteString("</table>\n")
}

func (p *page) warningTable() {
	if len(p.f.Warnings) == 0 {
		return
	}
	p.b.WriteString("<h2>Refusals ahead</h2><table><tr><th>at</th><th>schedule</th><th>target</th><th>reason</th><th>message</th></tr>\n")
	for _, w := range p.f.Warnings {
		fmt.Fprintf(&p.b, `<tr class="over"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`+"\n",
			p.at(w.At, "Mon 2006-01-02 15:04"), esc(w.Schedule), esc(w.Target), esc(w.Reason), esc(w.Message))
	}
	p.b.WriteString("</table>\n")
}

func (p *page) transitionTable() {
	if len(p.f.Transitions) == 0 {
		return
	}
	p.b.WriteString("<h2>Transitions</h2><table><tr><th>at</th><th>schedule</th><th>steps</th><th>before → peak → after</th></tr>\n")
	for _, tr := range p.f.Transitions {
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(tr.Peak)) {
			parts = append(parts, fmt.Sprintf("%s %d → %d → %d", ModelLabel(m), tr.Before[m], tr.Peak[m], tr.After[m]))
		}
		class := ""
		if len(tr.Over) > 0 {
			class = ` class="over"`
		}
		fmt.Fprintf(&p.b, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", class, p.at(tr.At, "Mon 2006-01-02 15:04"),
			esc(tr.Schedule), esc(strings.Join(stepTexts(tr.Steps), " → ")), esc(strings.Join(parts, "; ")))
	}
	p.b.WriteString("</table>\n")
}

func tickStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour} {
		if span/s <= 28 {
			return s
		}
	}
	return 48 * time.Hour
}

func firstTick(start time.Time, step time.Duration, loc *time.Location) time.Time {
	l := start.In(loc)
	t := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
	for t.Before(start) {
		t = t.Add(step)
	}
	return t
}

func tickLabel(t time.Time, step time.Duration) string {
	if step >= 24*time.Hour || (t.Hour() == 0 && t.Minute() == 0) {
		return t.Format("Mon 02")
	}
	return t.Format("15:04")
}
