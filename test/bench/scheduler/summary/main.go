// Command summary reads `go test -bench` output of the scheduler benchmark
// (test/bench/scheduler) and prints, per workload, the scheduling
// throughput of the stock and the Rota profile (median, and the smallest to
// the largest run) and the ratio of the medians, the CPU per pod of each
// ("ms/p": milliseconds of the benchmark process's CPU per measured pod,
// median and range) and its ratio, each one's largest peak RSS (MiB), the
// share of each profile's pods on the workload's best feasible tier, the
// share on each firstAvailable tier, and whether issue #39's goals are met.
// Where pods reported the reservation taint of their GPUs
// (MixedReservations), it counts them: free, on a reserved GPU their claim
// tolerates, or intruding on one it does not. Where the runs printed
// kube-apiserver's request counts (-rota-bench-requests-at), it then lists,
// per workload, the counts whose medians differ between the two profiles by
// more than the control plane's bookkeeping does.
package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

const (
	metric = "SchedulingThroughput/Average"
	// tierLine starts each line the harness's tier observer prints for a
	// bound pod: "rota-bench-tier <tier>/<tiers> <cpu-ns> <peak-rss-bytes>",
	// the last two the benchmark process's CPU time so far and its VmHWM.
	tierLine = "rota-bench-tier"
	// intruded is the fifth field of a tier line for a pod on a reserved
	// GPU its claim does not tolerate; "free" and "tolerated" the others.
	intruded = "intruded"
	// requestsLine starts each line of the harness's request counts:
	// "rota-bench-requests <verb> <resource> <count>", verb WATCH-EVENTS
	// for the watch events sent.
	requestsLine = "rota-bench-requests"
)

// result is what one workload measured under one profile.
type result struct {
	throughput []float64
	// cpuPerPod holds, per run, the process CPU time between the first and
	// the last measured pod's bind divided by the pods bound after the
	// first, in milliseconds; runs with fewer than two usage lines add none.
	cpuPerPod []float64
	peakRSS   int64       // largest VmHWM of any run, bytes
	tiers     map[int]int // 1-based tier -> pods; 0 = no tiered claim
	// reserved counts the pods by what their GPUs are as to the
	// reservation taint: "free", "tolerated", "intruded".
	reserved map[string]int
	// requests holds, per "<verb> <resource>", the count of each run that
	// printed request counts.
	requests map[string][]float64
}

// usage is what the tier lines of one run say about the process.
type usage struct {
	lines            int
	firstCPU, maxCPU int64 // nanoseconds
	peakRSS          int64 // bytes
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	samples, err := parse(in)
	if err != nil {
		return err
	}
	if len(samples) == 0 {
		// scheduler_perf measures no throughput for a workload that
		// schedules too fast ("Increase pods and/or nodes"): an empty table
		// would say nothing, and must not pass for a result.
		return fmt.Errorf("no workload reported %s: none ran, or each scheduled too few pods to measure", metric)
	}
	writeTable(out, samples)
	writeRequests(out, samples)
	return nil
}

// parse reads the benchmark output into results by workload
// ("family/workload") and profile.
func parse(in io.Reader) (map[string]map[string]*result, error) {
	p := &parser{samples: map[string]map[string]*result{}, pending: map[int]int{}, reserved: map[string]int{}, requests: map[string]float64{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if err := p.line(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return p.samples, nil
}

// parser is the state of parse between lines.
type parser struct {
	// workload -> profile -> result
	samples map[string]map[string]*result
	// Tier lines come while a run is in progress; the run's throughput line
	// follows them, so the lines seen since the previous throughput line
	// belong to the run that reports next. (With -benchtime 1x, go test
	// prints a benchmark's name after its first run and before later ones.)
	pending map[int]int
	// usage of the same pending lines.
	usage usage
	// reserved states of the same pending lines.
	reserved map[string]int
	// requests are the request counts printed since the previous
	// throughput line.
	requests map[string]float64
	// go test prints a benchmark's name when it starts and its metrics when
	// it ends; with the scheduler's log in between, the metrics may come on
	// a line of their own. Attribute them to the last name seen.
	current string
}

// line takes in one line of output: a tier line, a benchmark's name, its
// throughput, or none of these.
func (p *parser) line(text string) error {
	fields := strings.Fields(text)
	if (len(fields) == 2 || len(fields) == 4 || len(fields) == 5) && fields[0] == tierLine {
		tier, _, _ := strings.Cut(fields[1], "/")
		n, err := strconv.Atoi(tier)
		if err != nil {
			return fmt.Errorf("bad tier line %q: %w", text, err)
		}
		p.pending[n]++
		if len(fields) == 5 {
			switch fields[4] {
			case "free", "tolerated", intruded:
				p.reserved[fields[4]]++
			default:
				return fmt.Errorf("bad reserved state in tier line %q", text)
			}
		}
		if len(fields) >= 4 {
			cpu, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				return fmt.Errorf("bad CPU time in tier line %q: %w", text, err)
			}
			rss, err := strconv.ParseInt(fields[3], 10, 64)
			if err != nil {
				return fmt.Errorf("bad peak RSS in tier line %q: %w", text, err)
			}
			p.usage.add(cpu, rss)
		}
		return nil
	}
	if len(fields) == 4 && fields[0] == requestsLine {
		n, err := strconv.ParseFloat(fields[3], 64)
		if err != nil {
			return fmt.Errorf("bad count in request line %q: %w", text, err)
		}
		p.requests[fields[1]+" "+fields[2]] = n
		return nil
	}
	if len(fields) > 0 && strings.HasPrefix(fields[0], "BenchmarkPerfScheduling/") {
		p.current = fields[0]
	}
	for i := 1; i < len(fields); i++ {
		if fields[i] != metric || p.current == "" {
			continue
		}
		v, err := strconv.ParseFloat(fields[i-1], 64)
		if err != nil {
			return fmt.Errorf("%s: %w", p.current, err)
		}
		p.record(v)
	}
	return nil
}

// record adds a throughput of the current benchmark, with the tier lines
// pending, to its workload and profile.
func (p *parser) record(v float64) {
	family, profile, workload, ok := parseName(p.current)
	if !ok {
		return
	}
	key := family + "/" + workload
	if p.samples[key] == nil {
		p.samples[key] = map[string]*result{}
	}
	r := p.samples[key][profile]
	if r == nil {
		r = &result{tiers: map[int]int{}, reserved: map[string]int{}, requests: map[string][]float64{}}
		p.samples[key][profile] = r
	}
	r.throughput = append(r.throughput, v)
	for t, n := range p.pending {
		r.tiers[t] += n
	}
	clear(p.pending)
	for k, n := range p.reserved {
		r.reserved[k] += n
	}
	clear(p.reserved)
	if u := p.usage; u.lines >= 2 {
		r.cpuPerPod = append(r.cpuPerPod, float64(u.maxCPU-u.firstCPU)/float64(u.lines-1)/1e6)
	}
	r.peakRSS = max(r.peakRSS, p.usage.peakRSS)
	p.usage = usage{}
	if len(p.requests) > 0 {
		// A count a run did not print is 0 in that run: every run of a
		// profile then has an entry for every key any of its runs printed.
		runs := r.runsWithRequests()
		for k, n := range p.requests {
			if _, ok := r.requests[k]; !ok {
				r.requests[k] = make([]float64, runs)
			}
			r.requests[k] = append(r.requests[k], n)
		}
		for k, v := range r.requests {
			if len(v) == runs {
				r.requests[k] = append(v, 0)
			}
		}
		clear(p.requests)
	}
}

// runsWithRequests is how many runs of r printed request counts.
func (r *result) runsWithRequests() int {
	n := 0
	for _, v := range r.requests {
		n = max(n, len(v))
	}
	return n
}

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

// add takes in one tier line's process CPU time and peak RSS.
func (u *usage) add(cpu, rss int64) {
	if u.lines == 0 {
		u.firstCPU = cpu
	}
	u.lines++
	u.maxCPU = max(u.maxCPU, cpu)
	u.peakRSS = max(u.peakRSS, rss)
}

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

// parseName splits "BenchmarkPerfScheduling/MixedGPUsRota/500nodes_1000pods-2"
// into family "MixedGPUs", profile "Rota" and workload "500nodes_1000pods".
func parseName(name string) (family, profile, workload string, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return "", "", "", false
	}
	testCase, workload := parts[1], parts[2]
	if i := strings.LastIndex(workload, "-"); i > 0 {
		workload = workload[:i]
	}
	for _, p := range []string{"Stock", "Rota"} {
		if strings.HasSuffix(testCase, p) {
			return strings.TrimSuffix(testCase, p), p, workload, true
		}
	}
	return "", "", "", false
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
