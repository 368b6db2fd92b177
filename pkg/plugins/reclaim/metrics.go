package reclaim

import (
	"sync"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/rota-dev/rota/pkg/evictor"
)

var (
	metricsOnce sync.Once
	shared      *evictor.Metrics
)

// evictorMetrics are the evictor's metrics in the scheduler's legacy
// registry (which its /metrics endpoint serves), registered once per
// process: a test process runs many schedulers.
func evictorMetrics() *evictor.Metrics {
	metricsOnce.Do(func() { shared = evictor.NewMetricsFunc(legacyregistry.MustRegister) })
	return shared
}
