// Command summary reads `go test -bench` output of the scheduler benchmark
// (test/bench/scheduler) and prints, per workload, the median scheduling
// throughput of the stock and the Rota profile and their ratio.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

const metric = "SchedulingThroughput/Average"

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	// workload -> profile -> samples
	samples := map[string]map[string][]float64{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// go test prints a benchmark's name when it starts and its metrics when
	// it ends; with the scheduler's log in between, the metrics may come on
	// a line of their own. Attribute them to the last name seen.
	var current string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && strings.HasPrefix(fields[0], "BenchmarkPerfScheduling/") {
			current = fields[0]
		}
		for i := 1; i < len(fields); i++ {
			if fields[i] != metric || current == "" {
				continue
			}
			v, err := strconv.ParseFloat(fields[i-1], 64)
			if err != nil {
				return fmt.Errorf("%s: %w", current, err)
			}
			family, profile, workload, ok := parseName(current)
			if !ok {
				continue
			}
			key := family + "/" + workload
			if samples[key] == nil {
				samples[key] = map[string][]float64{}
			}
			samples[key][profile] = append(samples[key][profile], v)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	keys := make([]string, 0, len(samples))
	for k := range samples {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(out, "%-40s %6s %14s %14s %7s\n", "workload", "runs", "stock pods/s", "rota pods/s", "ratio")
	for _, k := range keys {
		stock, rota := samples[k]["Stock"], samples[k]["Rota"]
		ratio := "n/a"
		if len(stock) > 0 && len(rota) > 0 && median(stock) > 0 {
			ratio = fmt.Sprintf("%.2f", median(rota)/median(stock))
		}
		fmt.Fprintf(out, "%-40s %6s %14.1f %14.1f %7s\n", k, fmt.Sprintf("%d/%d", len(stock), len(rota)), median(stock), median(rota), ratio)
	}
	return nil
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
