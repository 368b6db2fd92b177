package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRun(t *testing.T) {
	in := `rota-bench-tier 1/2
rota-bench-tier 2/2
BenchmarkPerfScheduling/MixedGPUsStock/500nodes_1000pods-2   1   171.8 SchedulingDuration/Duration   6.0 SchedulingThroughput/Average
BenchmarkPerfScheduling/MixedGPUsStock/500nodes_1000pods-2   I1129 log line
rota-bench-tier 1/2
rota-bench-tier 1/2
       1   205.9 SchedulingDuration/Duration   4.0 SchedulingThroughput/Average
BenchmarkPerfScheduling/MixedGPUsStock/500nodes_1000pods-2   1   1 SchedulingDuration/Duration   5.0 SchedulingThroughput/Average
rota-bench-tier 1/2
rota-bench-tier 1/2
BenchmarkPerfScheduling/MixedGPUsRota/500nodes_1000pods-2   1   1 SchedulingDuration/Duration   4.5 SchedulingThroughput/Average
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := `workload                              runs stock pods/s        rota pods/s          ratio  stock ms/p             rota ms/p              cpu ratio  stock MiB  rota MiB  best stock best  rota best  stock pods/tier    rota pods/tier     goal
MixedGPUs/500nodes_1000pods            3/1 5.0 [4.0-6.0]       4.5                   0.90  -                      -                            n/a          -         -    t1        75%       100%  t1 75% t2 25%      t1 100%            misses: pods/s 0.90x<1.30x, ms/p unmeasured
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRunUsage: CPU per pod is a run's CPU time from its first to its last
// measured bind over the binds after the first; the summary takes the
// median over runs, and the largest peak RSS of any run.
func TestRunUsage(t *testing.T) {
	in := `rota-bench-tier 1/2 1000000000 104857600
rota-bench-tier 1/2 1010000000 209715200
rota-bench-tier 1/2 1030000000 157286400
BenchmarkPerfScheduling/BusyH100Stock/40nodes_100pods-2   1   1 SchedulingDuration/Duration   10 SchedulingThroughput/Average
rota-bench-tier 2/2 5000000000 104857600
rota-bench-tier 2/2 5020000000 104857600
BenchmarkPerfScheduling/BusyH100Stock/40nodes_100pods-2   1   1 SchedulingDuration/Duration   12 SchedulingThroughput/Average
rota-bench-tier 1/2 7000000000 1048576
rota-bench-tier 1/2 7050000000 1048576
BenchmarkPerfScheduling/BusyH100Stock/40nodes_100pods-2   1   1 SchedulingDuration/Duration   11 SchedulingThroughput/Average
rota-bench-tier 1/2 9000000000 314572800
rota-bench-tier 1/2 9012000000 314572800
BenchmarkPerfScheduling/BusyH100Rota/40nodes_100pods-2   1   1 SchedulingDuration/Duration   11 SchedulingThroughput/Average
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	// Stock's runs: 30 ms / 2 binds = 15, 20 / 1 = 20, 50 / 1 = 50 -> 20,
	// from 15 to 50. Throughput 10, 12, 11 -> 11, from 10 to 12. BusyH100's
	// best tier is t1: 5 of stock's 7 pods, all of Rota's; Rota's throughput
	// is 1.00x stock's, which meets the goal outside MixedGPUs.
	want := `workload                              runs stock pods/s        rota pods/s          ratio  stock ms/p             rota ms/p              cpu ratio  stock MiB  rota MiB  best stock best  rota best  stock pods/tier    rota pods/tier     goal
BusyH100/40nodes_100pods               3/1 11.0 [10.0-12.0]    11.0                  1.00  20.00 [15.00-50.00]    12.00                       1.67        200       300    t1        71%       100%  t1 71% t2 29%      t1 100%            meets
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRunOrder: rows go by family, then by node count, not by name.
func TestRunOrder(t *testing.T) {
	in := `BenchmarkPerfScheduling/MixedGPUsStock/500nodes_1000pods-2   1   1 SchedulingDuration/Duration   5 SchedulingThroughput/Average
BenchmarkPerfScheduling/MixedGPUsStock/2000nodes_500pods-2   1   1 SchedulingDuration/Duration   2 SchedulingThroughput/Average
BenchmarkPerfScheduling/MixedGPUsStock/40nodes_100pods-2   1   1 SchedulingDuration/Duration   9 SchedulingThroughput/Average
BenchmarkPerfScheduling/BusyH100Stock/500nodes_1000pods-2   1   1 SchedulingDuration/Duration   4 SchedulingThroughput/Average
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		got = append(got, strings.Fields(line)[0])
	}
	want := []string{"BusyH100/500nodes_1000pods", "MixedGPUs/40nodes_100pods", "MixedGPUs/500nodes_1000pods", "MixedGPUs/2000nodes_500pods"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row order (-want +got):\n%s", diff)
	}
}

// TestRunNothingMeasured: output with no throughput line (workloads too
// small to measure) is an error, not an empty table.
func TestRunNothingMeasured(t *testing.T) {
	in := "W1204 util.go:676] Failed to measure SchedulingThroughput for BenchmarkPerfScheduling/MixedGPUsStock/fast/test.\nPASS\n"
	if err := run(strings.NewReader(in), &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "no workload reported") {
		t.Fatalf("err = %v, want one saying nothing was measured", err)
	}
}

func TestRunBadUsage(t *testing.T) {
	for _, line := range []string{"rota-bench-tier 1/2 x 1", "rota-bench-tier 1/2 1 y", "rota-bench-tier a/2 1 1", "rota-bench-tier 1/2 1 1 maybe"} {
		if err := run(strings.NewReader(line+"\n"), &strings.Builder{}); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}

// TestRunRequests: request counts go with the run whose throughput line
// follows them; a workload lists the counts whose medians differ between
// the profiles by at least 2 and 5%, a count a run did not print being 0
// in that run.
func TestRunRequests(t *testing.T) {
	in := `rota-bench-requests POST events 100
rota-bench-requests POST pods/binding 100
rota-bench-requests APPLY flowschemas/status 15
BenchmarkPerfScheduling/MixedGPUsStock/40nodes_100pods-2   1   1 SchedulingDuration/Duration   50 SchedulingThroughput/Average
rota-bench-requests POST events 99
rota-bench-requests POST pods/binding 100
rota-bench-requests APPLY flowschemas/status 16
BenchmarkPerfScheduling/MixedGPUsStock/40nodes_100pods-2   1   1 SchedulingDuration/Duration   50 SchedulingThroughput/Average
rota-bench-requests POST events 198
rota-bench-requests POST pods/binding 100
rota-bench-requests APPLY flowschemas/status 16
rota-bench-requests PATCH pods 100
BenchmarkPerfScheduling/MixedGPUsRota/40nodes_100pods-2   1   1 SchedulingDuration/Duration   50 SchedulingThroughput/Average
rota-bench-requests POST events 200
rota-bench-requests POST pods/binding 100
BenchmarkPerfScheduling/MixedGPUsRota/40nodes_100pods-2   1   1 SchedulingDuration/Duration   50 SchedulingThroughput/Average
rota-bench-requests POST events 201
rota-bench-requests POST pods/binding 100
BenchmarkPerfScheduling/MixedGPUsRota/40nodes_100pods-2   1   1 SchedulingDuration/Duration   50 SchedulingThroughput/Average
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	// PATCH pods: 100, 0, 0 in Rota's runs, median 0, as in stock's.
	// POST pods/binding: 100 everywhere. APPLY flowschemas/status: stock
	// 15 and 16 (median 15.5), Rota 16, 0, 0 (median 0).
	want := `workload                              runs stock pods/s        rota pods/s          ratio  stock ms/p             rota ms/p              cpu ratio  stock MiB  rota MiB  best stock best  rota best  stock pods/tier    rota pods/tier     goal
MixedGPUs/40nodes_100pods              2/3 50.0 [50.0-50.0]    50.0 [50.0-50.0]      1.00  -                      -                            n/a          -         -    t1          -          -  -                  -                  misses: pods/s 1.00x<1.30x, ms/p unmeasured, tiers unmeasured

requests that differ           verb resource                            stock (med)  rota (med)
MixedGPUs/40nodes_100pods      APPLY flowschemas/status                          16           0
MixedGPUs/40nodes_100pods      POST events                                      100         200
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRunReserved: the fifth field of a tier line (MixedReservations) is
// counted per profile, in its own table; a Rota pod that intruded on a
// reserved GPU misses the goal even with every pod on the best tier.
func TestRunReserved(t *testing.T) {
	in := `rota-bench-tier 1/2 1000000 1048576 free
rota-bench-tier 1/2 2000000 1048576 tolerated
rota-bench-tier 1/2 3000000 1048576 free
BenchmarkPerfScheduling/MixedReservationsStock/fast-2   1   1 SchedulingDuration/Duration   20 SchedulingThroughput/Average
rota-bench-tier 1/2 1000000 1048576 free
rota-bench-tier 1/2 2000000 1048576 intruded
rota-bench-tier 1/2 3000000 1048576 tolerated
BenchmarkPerfScheduling/MixedReservationsRota/fast-2   1   1 SchedulingDuration/Duration   30 SchedulingThroughput/Average
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if got := lines[1]; !strings.HasSuffix(got, "misses: intruded") {
		t.Errorf("row %q: want the goal missed for the intrusion alone", got)
	}
	want := `pods on reserved GPUs                stock free/tolerated/intruded  rota free/tolerated/intruded
MixedReservations/fast               2/1/0                          1/1/1
`
	if got := strings.Join(lines[3:], "\n"); got != want {
		t.Errorf("reserved table (-want +got):\n%s", cmp.Diff(want, got))
	}
}

// TestGoal: MixedGPUs (the best tier has room) needs 1.3x stock's
// throughput and at most 0.8x its CPU per pod; Fallback (best tier t2)
// needs 1.0x and every pod on t2.
func TestGoal(t *testing.T) {
	res := func(thr, cpu []float64, tiers map[int]int) *result {
		return &result{throughput: thr, cpuPerPod: cpu, tiers: tiers, reserved: map[string]int{}}
	}
	for _, tc := range []struct {
		family      string
		stock, rota *result
		want        string
	}{
		{"MixedGPUs", res([]float64{10, 8, 9}, []float64{100}, map[int]int{1: 5}), res([]float64{12, 13, 11}, []float64{80}, map[int]int{1: 5}), "meets"},
		{"MixedGPUs", res([]float64{10}, []float64{100}, map[int]int{1: 5}), res([]float64{12}, []float64{81}, map[int]int{1: 5}), "misses: pods/s 1.20x<1.30x, ms/p 0.81x>0.80x"},
		{"Fallback", res([]float64{10}, nil, map[int]int{2: 5}), res([]float64{10}, nil, map[int]int{2: 5}), "meets"},
		{"Fallback", res([]float64{10}, nil, map[int]int{2: 5}), res([]float64{9}, nil, map[int]int{1: 1, 2: 4}), "misses: pods/s 0.90x<1.00x, best tier <100%"},
		{"ClaimTemplate", res([]float64{10}, nil, map[int]int{0: 5}), res([]float64{10}, nil, map[int]int{0: 5}), "meets"},
		{"Fallback", res(nil, nil, nil), res([]float64{10}, nil, map[int]int{2: 5}), "-"},
	} {
		if got := goal(tc.family, tc.stock, tc.rota); got != tc.want {
			t.Errorf("%s: goal = %q, want %q", tc.family, got, tc.want)
		}
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want string
	}{
		{nil, "-"},
		{[]float64{7.3}, "7.3"},
		{[]float64{9, 7, 8.04, 12, 8}, "8.0 [7.0-12.0]"},
	} {
		if got := spread(tc.v, "%.1f"); got != tc.want {
			t.Errorf("spread(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
