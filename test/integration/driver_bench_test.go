package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// BenchmarkNodePrepareResources prepares 32 time-sliced claims on a node with
// 8 GPUs (4 per GPU), all at once as a kubelet starting 32 pods would, over the
// plugin's real gRPC socket against a real API server, then unprepares them.
// Each NodePrepareResources call includes the helper's GET of the claim, the
// checkpoint writes (fsync) and the CDI spec. It reports the per-call latency
// percentiles.
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

	var latencies []time.Duration
	var mu sync.Mutex
	run := func(f func(c *resourceapi.ResourceClaim) error, record bool) {
		var wg sync.WaitGroup
		for _, c := range claims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				if err := f(c); err != nil {
					b.Error(err)
				}
				if record {
					mu.Lock()
					latencies = append(latencies, time.Since(start))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	prepare := func(c *resourceapi.ResourceClaim) error { _, err := n.prepare(ctx, c); return err }
	unprepare := func(c *resourceapi.ResourceClaim) error { return n.unprepare(ctx, c) }

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(prepare, true)
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
}
