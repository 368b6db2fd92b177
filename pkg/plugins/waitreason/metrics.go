package waitreason

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "rota_admission"

// pluginMetrics are the admission metrics, per tenant (namespace).
type pluginMetrics struct {
	waits            *metrics.CounterVec
	timeToAdmission  *metrics.HistogramVec
	tieredPlacements *metrics.CounterVec
	startFailures    *metrics.CounterVec
}

func newMetrics() *pluginMetrics {
	return &pluginMetrics{
		waits: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "waits_total",
			Help:           "Failed scheduling attempts of Rota pods, by wait reason and tenant (namespace).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"reason", "namespace"}),
		timeToAdmission: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Subsystem:      metricsSubsystem,
			Name:           "time_to_admission_seconds",
			Help:           "Time from pod creation to binding, by tenant (namespace).",
			Buckets:        metrics.ExponentialBuckets(0.05, 2, 16),
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace"}),
		tieredPlacements: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "tiered_placements_total",
			Help:           "Placed firstAvailable requests by tenant (namespace) and whether a later tier was granted (fallback=true); the fallback rate is their ratio.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace", "fallback"}),
		startFailures: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "start_failures_total",
			Help:           "Placed Rota pods that turned StartFailed, by cause (prepare: the DRA driver's NodePrepareResources failed; cdi: the runtime could not inject the CDI devices) and tenant (namespace).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"cause", "namespace"}),
	}
}

var (
	registerOnce sync.Once
	registered   *pluginMetrics
)

// registerMetrics registers the metrics once per process; every scheduler
// a test starts shares them, as Prometheus requires.
func registerMetrics() *pluginMetrics {
	registerOnce.Do(func() {
		registered = newMetrics()
		legacyregistry.MustRegister(registered.waits, registered.timeToAdmission, registered.tieredPlacements, registered.startFailures)
	})
	return registered
}
