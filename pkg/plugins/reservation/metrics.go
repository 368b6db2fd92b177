package reservation

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "rota_reservation"

// pluginMetrics are the plugin's Prometheus metrics on the scheduler's
// /metrics endpoint.
type pluginMetrics struct {
	refusals *metrics.CounterVec
	admitted *metrics.CounterVec
}

func newMetrics() *pluginMetrics {
	return &pluginMetrics{
		refusals: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "refusals_total",
			Help:           "Pods refused by the Reservation plugin, by reason (ReservationOvercommitted, ReservationNotMember, ...).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"reason"}),
		admitted: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "members_bound_total",
			Help:           "Member pods bound onto their reservation's node, by namespace.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace"}),
	}
}

var (
	registerOnce sync.Once
	registered   *pluginMetrics
)

// registerMetrics registers once per process: every profile and every
// scheduler a test starts shares the metrics, as Prometheus requires.
func registerMetrics() *pluginMetrics {
	registerOnce.Do(func() {
		registered = newMetrics()
		legacyregistry.MustRegister(registered.refusals, registered.admitted)
	})
	return registered
}
