//go:build benchscheduler

// Package scheduler runs upstream's scheduler benchmark suite
// (k8s.io/kubernetes/test/integration/scheduler_perf) with the stock
// kube-scheduler profile and the Rota profile side by side. Run it with
// `make bench-scheduler`; it needs an etcd binary on PATH.
package scheduler

import (
	"fmt"
	"os"
	"testing"

	_ "k8s.io/component-base/logs/json/register"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	rotascheduler "github.com/rota-dev/rota/pkg/scheduler"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	m.Run()
}

func registry() frameworkruntime.Registry {
	r := rotascheduler.Plugins()
	r[observerName] = newTierObserver(os.Stdout)
	return r
}

// BenchmarkPerfScheduling runs every test case of performance-config.yaml
// whose labels match -perf-scheduling-label-filter (default: performance).
// Upstream's integration runner takes no out-of-tree plugins, so the small
// "fast" workloads run as a benchmark too: -short selects them.
func BenchmarkPerfScheduling(b *testing.B) {
	perf.RunBenchmarkPerfScheduling(b, "performance-config.yaml", "rota", registry())
}
