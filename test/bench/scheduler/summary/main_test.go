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
	want := `workload                          runs stock pods/s  rota pods/s  ratio  stock pods/tier    rota pods/tier
MixedGPUs/500nodes_1000pods        3/1          5.0          4.5   0.90  t1 75% t2 25%      t1 100%
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
