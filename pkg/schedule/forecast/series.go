package forecast

import (
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
}

// Series is the demand of model over the range, one point per stretch
// where it changes (neighbouring segments of equal demand merged).
func (f *Forecast) Series(model string) []Point {
	var out []Point
	for _, s := range f.Segments {
		var loads []string
		for name := range s.Running {
			if f.Uses[name][model] {
				loads = append(loads, name)
			}
		}
		sort.Strings(loads)
		d := s.Demand[model]
		if n := len(out); n > 0 && out[n-1].Demand == d {
			out[n-1].To = s.To
			continue
		}
		out = append(out, Point{From: s.From, To: s.To, Demand: d, Loads: loads})
	}
	return out
}

// Collisions are the overcommits' schedules and targets, for a message:
// "ns/schedule/target, …".
func (o Overcommit) Collisions() string { return strings.Join(o.Targets, ", ") }
