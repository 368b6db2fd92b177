package forecast

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Point is the demand of one model over [From, To), with the loads that
// make it up.
type Point struct {
	From, To time.Time
	Demand   int
	Loads    []string
	// Nodes are the GPUs of the model per node where the pods pack; nil
	// when they were not all placed.
	Nodes map[string]int
}

// Series is the demand of model over the range, one point per stretch
// where it changes (neighbouring segments of equal demand merged; Nodes
// are then the first segment's).
func (f *Forecast) Series(model string) []Point { return f.series(model, false) }

// series is Series; byNode also splits where the GPUs per node change
// (and then each point's Nodes hold for all of it).
func (f *Forecast) series(model string, byNode bool) []Point {
	var out []Point
	for _, s := range f.Segments {
		var loads []string
		for name := range s.Running {
			if s.Loads != nil && s.Loads[name][model] > 0 || s.Loads == nil && f.Uses[name][model] {
				loads = append(loads, name)
			}
		}
		sort.Strings(loads)
		d := s.Demand[model]
		var nodes map[string]int
		if s.Nodes != nil {
			nodes = map[string]int{}
			for node, per := range s.Nodes {
				if per[model] > 0 {
					nodes[node] = per[model]
				}
			}
		}
		same := !byNode || (out != nil && (out[len(out)-1].Nodes == nil) == (nodes == nil) && maps.Equal(out[len(out)-1].Nodes, nodes))
		if n := len(out); n > 0 && out[n-1].Demand == d && same {
			out[n-1].To = s.To
			continue
		}
		out = append(out, Point{From: s.From, To: s.To, Demand: d, Loads: loads, Nodes: nodes})
	}
	return out
}

// NodeSeries is the demand of model on one node over the stretches where
// every pod packs, one point per stretch where it changes; stretches where
// some pod finds no node are left out.
func (f *Forecast) NodeSeries(model, node string) []Point {
	var out []Point
	for _, p := range f.series(model, true) {
		if p.Nodes == nil {
			continue
		}
		d := p.Nodes[node]
		if n := len(out); n > 0 && out[n-1].To.Equal(p.From) && out[n-1].Demand == d {
			out[n-1].To = p.To
			continue
		}
		out = append(out, Point{From: p.From, To: p.To, Demand: d})
	}
	return out
}

// perNodeText is "node=GPUs, …" of a point, "-" when not packed.
func perNodeText(p Point) string {
	if p.Nodes == nil {
		return "-"
	}
	var parts []string
	for _, node := range slices.Sorted(maps.Keys(p.Nodes)) {
		parts = append(parts, fmt.Sprintf("%s=%d", node, p.Nodes[node]))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// Collisions are the overcommits' schedules and targets, for a message:
// "ns/schedule/target, …".
func (o Overcommit) Collisions() string { return strings.Join(o.Targets, ", ") }

// Text is "2 × A100 instead of H100" with the tier when there is one:
// "2 × A100 (tier 2/2 a100) instead of H100".
func (fb Fallback) Text() string {
	on := ModelLabel(fb.Model)
	if fb.Tier != "" {
		on += " (tier " + fb.Tier + ")"
	}
	return fmt.Sprintf("%d × %s instead of %s", fb.GPUs, on, ModelLabel(fb.Preferred))
}

// Text is "1 pod of serving/s/sdxl (4 × H100)".
func (u Unplaced) Text() string {
	var gpus []string
	for _, m := range slices.Sorted(maps.Keys(u.GPUs)) {
		gpus = append(gpus, fmt.Sprintf("%d × %s", u.GPUs[m], ModelLabel(m)))
	}
	pods := "pods"
	if u.Pods == 1 {
		pods = "pod"
	}
	return fmt.Sprintf("%d %s of %s (%s)", u.Pods, pods, u.Load, strings.Join(gpus, ", "))
}
