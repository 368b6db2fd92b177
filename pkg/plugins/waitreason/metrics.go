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
	waitingPods      *metrics.GaugeVec
	unplacedWait     *metrics.HistogramVec
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
		waitingPods: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Subsystem:      metricsSubsystem,
			Name:           "waiting_pods",
			Help:           "Rota pods waiting now, by the device model of their first tier (model; unknown when not counted) and wait reason.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"model", "reason"}),
		unplacedWait: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Subsystem:      metricsSubsystem,
			Name:           "unplaced_wait_seconds",
			Help:           "How long Rota pods that were never placed had waited when they were deleted, by the device model of their first tier and their last wait reason.",
			Buckets:        metrics.ExponentialBuckets(1, 2, 18),
			StabilityLevel: metrics.ALPHA,
		}, []string{"model", "reason"}),
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
		legacyregistry.MustRegister(registered.waits, registered.timeToAdmission, registered.tieredPlacements, registered.startFailures,
			registered.waitingPods, registered.unplacedWait)
	})
	return registered
}
