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
	"fmt"
	"io"
	"os"
	"slices"
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
