package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// bestTier is, per workload family, the firstAvailable tier that is the
// best feasible one for every measured pod by the workload's construction
// (performance-config.yaml): tier 1 where an H100 is free for every pod,
// tier 2 where none is (Fallback) or the first subrequest names a class
// without devices (FirstAvailable). ClaimTemplate's claims have no tiers.
var bestTier = map[string]int{
	"MixedGPUs":         1,
	"BusyH100":          1,
	"Fallback":          2,
	"MixedReservations": 1,
	"FirstAvailable":    2,
}

// Issue #39's goals for the Rota profile against stock: where the best
// tier has room (MixedGPUs) at least bestFreeThroughput times stock's
// throughput at most bestFreeCPU times stock's CPU per pod; on every other
// workload at least otherThroughput times stock's throughput; on all, every
// pod on the best feasible tier and none on a reserved GPU its claim does
// not tolerate.
const (
	bestFreeFamily     = "MixedGPUs"
	bestFreeThroughput = 1.3
	bestFreeCPU        = 0.8
	otherThroughput    = 1.0
)

// writeTable prints one row per workload, by family and then by node
// count, then the reserved-GPU counts of the workloads that reported them.
func writeTable(out io.Writer, samples map[string]map[string]*result) {
	keys := make([]string, 0, len(samples))
	for k := range samples {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareWorkloads)
	row := func(format string, args ...any) {
		fmt.Fprintln(out, strings.TrimRight(fmt.Sprintf(format, args...), " "))
	}
	// ratio: Rota's throughput over stock's; cpu ratio: stock's CPU per pod
	// over Rota's. Above 1.00 Rota is the faster, or the cheaper. Each
	// figure is the median over runs, with the smallest and the largest run
	// in brackets where there are two or more.
	const format = "%-36s %5s %-19s %-19s %6s  %-22s %-22s %9s  %9s %9s  %4s %10s %10s  %-18s %-18s %s"
	row(format, "workload", "runs", "stock pods/s", "rota pods/s", "ratio", "stock ms/p", "rota ms/p", "cpu ratio",
		"stock MiB", "rota MiB", "best", "stock best", "rota best", "stock pods/tier", "rota pods/tier", "goal")
	for _, k := range keys {
		stock, rota := orEmpty(samples[k]["Stock"]), orEmpty(samples[k]["Rota"])
		family, _, _ := strings.Cut(k, "/")
		best := "-"
		if t, ok := bestTier[family]; ok {
			best = fmt.Sprintf("t%d", t)
		}
		row(format, k,
			fmt.Sprintf("%d/%d", len(stock.throughput), len(rota.throughput)),
			spread(stock.throughput, "%.1f"), spread(rota.throughput, "%.1f"), ratio(rota.throughput, stock.throughput),
			spread(stock.cpuPerPod, "%.2f"), spread(rota.cpuPerPod, "%.2f"), ratio(stock.cpuPerPod, rota.cpuPerPod),
			mib(stock.peakRSS), mib(rota.peakRSS),
			best, bestShare(family, stock.tiers), bestShare(family, rota.tiers),
			tierShares(stock.tiers), tierShares(rota.tiers), goal(family, stock, rota))
	}
	writeReserved(out, keys, samples)
}

func orEmpty(r *result) *result {
	if r == nil {
		return &result{}
	}
	return r
}

// writeReserved prints, per workload whose pods reported the reservation
// taint of their GPUs, how many of each profile's pods got a free GPU, a
// reserved one their claim tolerates, and a reserved one it does not.
func writeReserved(out io.Writer, keys []string, samples map[string]map[string]*result) {
	header := false
	for _, k := range keys {
		stock, rota := orEmpty(samples[k]["Stock"]), orEmpty(samples[k]["Rota"])
		if len(stock.reserved) == 0 && len(rota.reserved) == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(out, "\n%-36s %-30s %s\n", "pods on reserved GPUs", "stock free/tolerated/intruded", "rota free/tolerated/intruded")
			header = true
		}
		counts := func(r *result) string {
			return fmt.Sprintf("%d/%d/%d", r.reserved["free"], r.reserved["tolerated"], r.reserved[intruded])
		}
		fmt.Fprintf(out, "%-36s %-30s %s\n", k, counts(stock), counts(rota))
	}
}

// goal says whether Rota meets issue #39's goals on a workload, "-" when
// either profile has no run, else "meets" or "misses:" and what.
func goal(family string, stock, rota *result) string {
	if len(stock.throughput) == 0 || len(rota.throughput) == 0 {
		return "-"
	}
	var missed []string
	thr := median(rota.throughput) / median(stock.throughput)
	want := otherThroughput
	if family == bestFreeFamily {
		want = bestFreeThroughput
	}
	if median(stock.throughput) == 0 || thr < want {
		missed = append(missed, fmt.Sprintf("pods/s %.2fx<%.2fx", thr, want))
	}
	if family == bestFreeFamily {
		switch s, r := median(stock.cpuPerPod), median(rota.cpuPerPod); {
		case len(stock.cpuPerPod) == 0 || len(rota.cpuPerPod) == 0:
			missed = append(missed, "ms/p unmeasured")
		case r > bestFreeCPU*s:
			missed = append(missed, fmt.Sprintf("ms/p %.2fx>%.2fx", r/s, bestFreeCPU))
		}
	}
	if t, ok := bestTier[family]; ok {
		switch {
		case total(rota.tiers) == 0:
			missed = append(missed, "tiers unmeasured")
		case tierShare(rota.tiers, t) < 1:
			missed = append(missed, "best tier <100%")
		}
	}
	if rota.reserved[intruded] > 0 {
		missed = append(missed, "intruded")
	}
	if len(missed) == 0 {
		return "meets"
	}
	return "misses: " + strings.Join(missed, ", ")
}

// bestShare is the share of pods on the family's best feasible tier, "-"
// when the family has none or no pod reported a tier.
func bestShare(family string, tiers map[int]int) string {
	t, ok := bestTier[family]
	if !ok || total(tiers) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*tierShare(tiers, t))
}

// tierShare is the fraction of pods on tier t, 0 with no pods.
func tierShare(tiers map[int]int, t int) float64 {
	n := total(tiers)
	if n == 0 {
		return 0
	}
	return float64(tiers[t]) / float64(n)
}

func total(tiers map[int]int) int {
	n := 0
	for _, v := range tiers {
		n += v
	}
	return n
}

// spread formats the median of v, and with two or more values the
// smallest and the largest in brackets: "8.1 [7.1-8.2]"; "-" without any.
func spread(v []float64, verb string) string {
	switch len(v) {
	case 0:
		return "-"
	case 1:
		return fmt.Sprintf(verb, v[0])
	}
	return fmt.Sprintf(verb+" ["+verb+"-"+verb+"]", median(v), slices.Min(v), slices.Max(v))
}

// compareWorkloads orders "family/<N>nodes_..." keys by family, then by the
// number their workload name starts with, then by name.
func compareWorkloads(a, b string) int {
	fa, wa, _ := strings.Cut(a, "/")
	fb, wb, _ := strings.Cut(b, "/")
	if c := strings.Compare(fa, fb); c != 0 {
		return c
	}
	if c := leadingNumber(wa) - leadingNumber(wb); c != 0 {
		return c
	}
	return strings.Compare(wa, wb)
}

// leadingNumber is the number s starts with, 0 if none.
func leadingNumber(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, _ := strconv.Atoi(s[:i])
	return n
}

// ratio is the ratio of the medians of a and b, "n/a" without both.
func ratio(a, b []float64) string {
	if len(a) == 0 || len(b) == 0 || median(b) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", median(a)/median(b))
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatInt(b>>20, 10)
}

// tierShares formats pods per tier as "t1 100%", "t1 62% t2 38%"; tier 0
// (no tiered claim) as "untiered".
func tierShares(tiers map[int]int) string {
	total := total(tiers)
	if total == 0 {
		return "-"
	}
	keys := make([]int, 0, len(tiers))
	for t := range tiers {
		keys = append(keys, t)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, t := range keys {
		name := fmt.Sprintf("t%d", t)
		if t == 0 {
			name = "untiered"
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", name, 100*float64(tiers[t])/float64(total)))
	}
	return strings.Join(parts, " ")
}
