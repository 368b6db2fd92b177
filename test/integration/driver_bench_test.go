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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
// These run the plugin in the test process, beside the in-process API
// server and etcd: the garbage collector marks their heap too, and
// cpu-ms/op is the whole process's CPU during the prepares. On a node the
// plugin is its own process, with its own small heap; so:
//   - process/concurrent-32 and process/alone: the same claims and configs as
//     concurrent-32 and alone, prepared by the dra-kubelet-plugin binary
//     (`make build`'s, from ROTA_BIN_DIR, or built for the benchmark) running
//     as its own process against the test's API server, over its real socket.
//     The in-process plugin is stopped first. They report plugin-cpu-ms/op
//     (the binary's user+system CPU, from /proc/<pid>/stat in 10 ms ticks,
//     summed over all iterations before the division) and test-cpu-ms/op
//     (the test process: API server, etcd and the kubelet's client), and
//     fsyncs/claim from the binary's /metrics.
//
// Both plugins' API clients have no rate limit (the in-process one's talks
// protobuf, as the binary's does): a node's one burst of 32 claim reads fits
// the DaemonSet's 25 QPS / burst 50, but the benchmark's back-to-back bursts
// would soon measure the client's rate limiter instead of the plugin. With
// the test client's 500 QPS and burst 1,000, runs past ~30 iterations did:
// the GETs came 2 ms apart, each call found an empty queue and batches
// shrank to a claim or two.
//
// Each call includes the helper's GET of the claim, the checkpoint writes
// (fsync) and the CDI spec. It reports the per-call latency percentiles and
// the checkpoint writes per prepared claim.
func BenchmarkNodePrepareResources(b *testing.B) {
	ctx := context.Background()
	cp := framework.StartControlPlane(b)
	cp.Create(b, framework.DeviceClass(), framework.Namespace("bench"))
	n := startGPUNode(b, cp, "node-bench", "dgx-h100", func(g *gpuNode) { g.kubeClient = unlimitedClient(b, cp) })
	const share = `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Medium"}},"memoryMiB":16384}`
	claims := make([]*resourceapi.ResourceClaim, 32)
	for i := range claims {
		claims[i] = n.allocatedClaim(ctx, "bench", fmt.Sprintf("c%02d", i), share, fmt.Sprintf("gpu-%d", i%8))
	}
	prepare := func(c *resourceapi.ResourceClaim) error { _, err := n.prepare(ctx, c); return err }
	unprepare := func(c *resourceapi.ResourceClaim) error { return n.unprepare(ctx, c) }
	inProcess := prepareMeter{
		writes: func(b testing.TB) float64 { return checkpointWrites(b, n) },
		cpu:    map[string]func(testing.TB) time.Duration{"cpu-ms/op": processCPU},
	}
	b.Run("concurrent-32", func(b *testing.B) {
		benchPrepare(b, inProcess, claims, prepare, unprepare, true)
	})
	exclusive := n.allocatedClaim(ctx, "bench", "exclusive", "", "gpu-0")
	b.Run("alone", func(b *testing.B) {
		benchPrepare(b, inProcess, []*resourceapi.ResourceClaim{exclusive}, prepare, unprepare, false)
	})
	b.Run("alone-interval-change", func(b *testing.B) {
		benchPrepare(b, inProcess, claims[:1], prepare, unprepare, false)
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
			benchPrepare(b, inProcess, curve[:k], prepare, unprepare, true)
		})
	}
	b.Run("process", func(b *testing.B) {
		n.stop() // the test process keeps only the API server, etcd and the kubelet's client
		benchPluginProcess(b, cp, share)
	})
}

// benchPluginProcess runs the process/ sub-benchmarks of
// BenchmarkNodePrepareResources: the plugin binary on its own node.
func benchPluginProcess(b *testing.B, cp *framework.ControlPlane, share string) {
	ctx := context.Background()
	n := startGPUNode(b, cp, "node-bench-process", "dgx-h100", func(g *gpuNode) { g.external = true })
	proc := startPluginProcess(b, n, 8, freeLocalAddr(b), "--kube-api-qps", "1000000", "--kube-api-burst", "1000000")
	claims := make([]*resourceapi.ResourceClaim, 32)
	for i := range claims {
		claims[i] = n.allocatedClaim(ctx, "bench", fmt.Sprintf("p-c%02d", i), share, fmt.Sprintf("gpu-%d", i%8))
	}
	exclusive := n.allocatedClaim(ctx, "bench", "p-exclusive", "", "gpu-0")
	prepare := func(c *resourceapi.ResourceClaim) error { _, err := n.prepare(ctx, c); return err }
	unprepare := func(c *resourceapi.ResourceClaim) error { return n.unprepare(ctx, c) }
	meter := prepareMeter{
		writes: func(b testing.TB) float64 { return proc.counter(b, "rota_driver_checkpoint_writes_total") },
		cpu:    map[string]func(testing.TB) time.Duration{"plugin-cpu-ms/op": proc.cpu, "test-cpu-ms/op": processCPU},
		check:  proc.checkRunning,
	}
	b.Run("concurrent-32", func(b *testing.B) {
		benchPrepare(b, meter, claims, prepare, unprepare, true)
	})
	b.Run("alone", func(b *testing.B) {
		benchPrepare(b, meter, []*resourceapi.ResourceClaim{exclusive}, prepare, unprepare, false)
	})
}

// unlimitedClient is a client of the test's API server without a rate limit,
// speaking protobuf as the plugin binary does.
func unlimitedClient(b *testing.B, cp *framework.ControlPlane) kubernetes.Interface {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS = -1
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// prepareMeter is what benchPrepare reads around the prepares, besides
// their latency.
type prepareMeter struct {
	// writes is the plugin's rota_driver_checkpoint_writes_total.
	writes func(testing.TB) float64
	// cpu are CPU-time counters by the unit each is reported in, per op.
	cpu map[string]func(testing.TB) time.Duration
	// check, when set, fails the benchmark if the plugin is gone.
	check func(testing.TB)
}

func benchPrepare(b *testing.B, m prepareMeter, claims []*resourceapi.ResourceClaim, prepare, unprepare func(*resourceapi.ResourceClaim) error, concurrent bool) {
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
	cpu := make(map[string]time.Duration, len(m.cpu))
	cpuBefore := make(map[string]time.Duration, len(m.cpu))
	// The timer runs only for the prepares: reading the meter can mean two
	// /metrics scrapes per op.
	b.StopTimer()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := m.writes(b)
		for unit, read := range m.cpu {
			cpuBefore[unit] = read(b)
		}
		b.StartTimer()
		run(prepare, true)
		b.StopTimer()
		for unit, read := range m.cpu {
			cpu[unit] += read(b) - cpuBefore[unit]
		}
		writes += m.writes(b) - before
		run(unprepare, false)
		if m.check != nil {
			m.check(b)
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms/claim")
	b.ReportMetric(pct(0.99), "p99-ms/claim")
	b.ReportMetric(float64(len(claims)), "claims/op")
	b.ReportMetric(writes/float64(b.N*len(claims)), "fsyncs/claim")
	// CPU during the prepares; in-process (cpu-ms/op), the plugin's but
	// also the API server's (it serves the claim reads).
	for unit, d := range cpu {
		b.ReportMetric(float64(d)/float64(time.Millisecond)/float64(b.N), unit)
	}
}

// processCPU is the test process's CPU time so far (user and system).
func processCPU(testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkpointWrites reads the in-process plugin's
// rota_driver_checkpoint_writes_total.
func checkpointWrites(b testing.TB, n *gpuNode) float64 {
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
