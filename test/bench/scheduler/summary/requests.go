package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
)

// writeRequests lists, per workload, the request counts whose medians
// differ between stock and Rota (differ): API writes or watch events one
// profile causes and the other does not. Nothing when no run printed
// counts.
func writeRequests(out io.Writer, samples map[string]map[string]*result) {
	keys := make([]string, 0, len(samples))
	for k := range samples {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareWorkloads)
	header := false
	for _, w := range keys {
		stock, rota := samples[w]["Stock"], samples[w]["Rota"]
		if stock == nil || rota == nil || len(stock.requests) == 0 || len(rota.requests) == 0 {
			continue
		}
		sorted := slices.AppendSeq(slices.Collect(maps.Keys(stock.requests)), maps.Keys(rota.requests))
		slices.Sort(sorted)
		sorted = slices.Compact(sorted)
		for _, k := range sorted {
			s, r := countMedian(stock, k), countMedian(rota, k)
			if !differ(s, r) {
				continue
			}
			if !header {
				fmt.Fprintf(out, "\n%-30s %-40s %11s %11s\n", "requests that differ", "verb resource", "stock (med)", "rota (med)")
				header = true
			}
			fmt.Fprintf(out, "%-30s %-40s %11.0f %11.0f\n", w, k, s, r)
		}
	}
}

// differ reports whether two request counts differ by more than the
// control plane's own bookkeeping (leases, flow schemas, watches restarted)
// moves between runs: by at least 2 and by at least 5% of the larger.
func differ(a, b float64) bool {
	d := math.Abs(a - b)
	return d >= 2 && d >= 0.05*max(a, b)
}

// countMedian is the median of a request count over the runs of r that
// printed counts, 0 in those that did not print this one.
func countMedian(r *result, key string) float64 {
	v, ok := r.requests[key]
	if !ok {
		return 0
	}
	return median(v)
}
