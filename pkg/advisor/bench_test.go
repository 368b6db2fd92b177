package advisor

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// benchCluster is 1,000 nodes × 8 H100s; each node runs six one-GPU pods
// of ten tenants (every third pod under a budget that allows one
// disruption), so 2,000 GPUs are free but no node has more than two. 200
// pods wait, each for four H100s on one node.
func benchCluster() (*Snapshot, []*Workload) {
	nodes := map[string]string{}
	for i := range benchNodes {
		nodes[fmt.Sprintf("node-%04d", i)] = "H100"
	}
	c := newCluster(nodes, 8)
	h100 := c.tier("H100", 1)
	for i := range benchNodes {
		for j := range 6 {
			key := fmt.Sprintf("t%d/p-%04d-%d", (i+j)%10, i, j)
			w := Workload{Key: key, Namespace: fmt.Sprintf("t%d", (i+j)%10), Priority: int32(j % 3), Held: []string{fmt.Sprintf("node-%04d/gpu-%d", i, j)},
				Groups: []Group{{Pods: []string{key}, Requests: []Request{{Name: "gpu", Tiers: []Tier{h100}}}}}}
			if j%3 == 0 {
				w.Budgets = map[string]int{w.Namespace + "/serving": 1}
			}
			c.snap.Running = append(c.snap.Running, w)
		}
	}
	holders := map[string]string{}
	for _, w := range c.snap.Running {
		holders[w.Held[0]] = w.Key
	}
	for i := range c.snap.Devices {
		c.snap.Devices[i].Holder = holders[c.snap.Devices[i].ID]
	}
	for t := range 10 {
		c.snap.Budgets[fmt.Sprintf("t%d/serving", t)] = 1
	}
	var units []*Workload
	for i := range 200 {
		units = append(units, c.waiting(fmt.Sprintf("w/job-%03d", i), "w", "H100", 4))
	}
	return c.snap, units
}

const benchNodes = 1000

// BenchmarkAdvise200Waiting advises all 200 waiting pods once per
// iteration (docs/benchmarks.md records the figures).
func BenchmarkAdvise200Waiting(b *testing.B) {
	snap, units := benchCluster()
	b.ResetTimer()
	cpu := cpuNow()
	checks, truncated := 0, 0
	for b.Loop() {
		for _, u := range units {
			a := Advise(snap, u, Options{})
			if len(a.Options) == 0 || a.Options[0].Kind != KindMove || a.Options[0].GPUs != 2 {
				b.Fatalf("advice %+v, want a 2-GPU move first", a.Options)
			}
			checks += a.Checks
			if a.Truncated {
				truncated++
			}
		}
	}
	b.ReportMetric(float64(checks)/float64(b.N*len(units)), "checks/pod")
	b.ReportMetric(float64(truncated)/float64(b.N*len(units)), "truncated/pod")
	reportCPU(b, cpu)
}

// cpuNow is the process's CPU time (user and system), which the machine's
// other load does not inflate as it does wall time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ms/op: CPU time per iteration since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuNow()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
