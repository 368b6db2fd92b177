package advisor

import (
	"sort"
	"strings"
)

func (w *Workload) pods() []string {
	var out []string
	for _, g := range w.Groups {
		out = append(out, g.Pods...)
	}
	if len(out) == 0 {
		out = []string{w.Key}
	}
	return out
}

// model names the model of ids, "mixed" when they differ.
func (ix *index) model(ids []string) string {
	m := ""
	for _, id := range ids {
		d := ix.byID[id]
		if d == nil {
			continue
		}
		if m != "" && m != d.Model {
			return "mixed"
		}
		m = d.Model
	}
	return m
}

func (ix *index) nodesOf(ids []string) []string {
	var out []string
	for _, id := range ids {
		if d := ix.byID[id]; d != nil {
			out = appendUnique(out, d.Node)
		}
	}
	sort.Strings(out)
	return out
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func setOf(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func placedNodes(ps []Placed) string {
	var nodes []string
	for _, p := range ps {
		nodes = appendUnique(nodes, p.Node)
	}
	return strings.Join(nodes, ",")
}
