package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// BenchmarkNodePrepareResources prepares time-sliced claims on a node with
// 8 GPUs over the plugin's real gRPC socket against a real API server, one
// NodePrepareResources call per claim, then unprepares them:
//   - concurrent-32: 32 claims (4 per GPU) all at once, as a kubelet
//     starting 32 pods would;
//   - alone: one exclusive claim at a time (no GPU setting changes);
//   - alone-interval-change: one time-sliced claim at a time, each the first
//     on its GPU, so its interval changes (and changes back at unprepare);
//   - claims=1, 8, 32, 64: that many time-sliced claims (8 GiB each) all
//     at once, round-robin over the 8 GPUs: how a node's prepare time grows
//     with the pods starting on it together.
//
// Each call includes the helper's GET of the claim, the checkpoint writes
// (fsync) and the CDI spec. It reports the per-call latency percentiles and
// the checkpoint writes per prepared claim.
func BenchmarkNodePrepareResources(b *testing.B) {
	ctx := context.Background()
	cp := framework.StartControlPlane(b)
	cp.Create(b, framework.DeviceClass(), framework.Namespace("bench"))
	n := startGPUNode(b, cp, "node-bench", "dgx-h100")
	const share = `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Medium"}},"memoryMiB":16384}`
	claims := make([]*resourceapi.ResourceClaim, 32)
	for i := range claims {
		claims[i] = n.allocatedClaim(ctx, "bench", fmt.Sprintf("c%02d", i), share, fmt.Sprintf("gpu-%d", i%8))
	}
	prepare := func(c *resourceapi.ResourceClaim) error { _, err := n.prepare(ctx, c); return err }
	unprepare := func(c *resourceapi.ResourceClaim) error { return n.unprepare(ctx, c) }
	b.Run("concurrent-32", func(b *testing.B) {
		benchPrepare(b, n, claims, prepare, unprepare, true)
	})
	exclusive := n.allocatedClaim(ctx, "bench", "exclusive", "", "gpu-0")
	b.Run("alone", func(b *testing.B) {
		benchPrepare(b, n, []*resourceapi.ResourceClaim{exclusive}, prepare, unprepare, false)
	})
	b.Run("alone-interval-change", func(b *testing.B) {
		benchPrepare(b, n, claims[:1], prepare, unprepare, false)
	})
	// The cost curve: k time-sliced claims at once, spread over the 8 GPUs
	// (up to 8 per GPU, 8 GiB each, so 64 fit an 80 GiB H100).
	const small = `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Medium"}},"memoryMiB":8192}`
	curve := make([]*resourceapi.ResourceClaim, 64)
	for i := range curve {
		curve[i] = n.allocatedClaim(ctx, "bench", fmt.Sprintf("k%02d", i), small, fmt.Sprintf("gpu-%d", i%8))
	}
	for _, k := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("claims=%d", k), func(b *testing.B) {
			benchPrepare(b, n, curve[:k], prepare, unprepare, true)
		})
	}
}

func benchPrepare(b *testing.B, n *gpuNode, claims []*resourceapi.ResourceClaim, prepare, unprepare func(*resourceapi.ResourceClaim) error, concurrent bool) {
	var latencies []time.Duration
	var mu sync.Mutex
	run := func(f func(c *resourceapi.ResourceClaim) error, record bool) {
		var wg sync.WaitGroup
		for _, c := range claims {
			call := func() {
				start := time.Now()
				if err := f(c); err != nil {
					b.Error(err)
				}
				if record {
					mu.Lock()
					latencies = append(latencies, time.Since(start))
					mu.Unlock()
				}
			}
			if !concurrent {
				call()
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); call() }()
		}
		wg.Wait()
	}
	var writes float64
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before, cpuBefore := checkpointWrites(b, n), processCPU()
		run(prepare, true)
		cpu += processCPU() - cpuBefore
		writes += checkpointWrites(b, n) - before
		b.StopTimer()
		run(unprepare, false)
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms/claim")
	b.ReportMetric(pct(0.99), "p99-ms/claim")
	b.ReportMetric(float64(len(claims)), "claims/op")
	b.ReportMetric(writes/float64(b.N*len(claims)), "fsyncs/claim")
	// The process's CPU during the prepares: the plugin's, but also the
	// in-process API server's (it serves the claim reads).
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// processCPU is the process's CPU time so far (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkpointWrites reads the plugin's rota_driver_checkpoint_writes_total.
func checkpointWrites(b *testing.B, n *gpuNode) float64 {
	families, err := n.plugin.Metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "rota_driver_checkpoint_writes_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	b.Fatal("rota_driver_checkpoint_writes_total not exported")
	return 0
}
