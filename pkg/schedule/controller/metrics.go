package controller

import (
	"k8s.io/component-base/metrics"
)

// controllerMetrics are the controller's Prometheus metrics (docs/schedule.md, "Metrics").
type controllerMetrics struct {
	serving     *metrics.GaugeVec
	boundaryLag *metrics.Histogram
	actions     *metrics.CounterVec
	// scheduleReads counts how passes read their schedule: "cache" (the
	// informer) or "api" (a GET: the cache was behind the version last
	// seen).
	scheduleReads *metrics.CounterVec
}

func newMetrics(reg metrics.KubeRegistry) *controllerMetrics {
	m := &controllerMetrics{
		serving: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: "rota", Subsystem: "schedule", Name: "targets_serving",
			Help:           "Targets of a DeploySchedule with at least one ready replica.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace", "schedule"}),
		boundaryLag: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: "rota", Subsystem: "schedule", Name: "boundary_lag_seconds",
			Help:           "Time from an intent boundary to the target converging on the new intent.",
			Buckets:        metrics.ExponentialBuckets(1, 2, 14),
			StabilityLevel: metrics.ALPHA,
		}),
		actions: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: "rota", Subsystem: "schedule", Name: "actions_total",
			Help:           "Transition step outcomes by action (Stop, Start, Scale) and reason (Submitted, Converged, or a terminal reason).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"action", "reason"}),
		scheduleReads: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: "rota", Subsystem: "schedule", Name: "schedule_reads_total",
			Help:           "How passes read their DeploySchedule: from the informer cache (cache) or with a GET because the cache was behind the version the controller last wrote or read (api).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"source"}),
	}
	if reg != nil {
		reg.MustRegister(m.serving, m.boundaryLag, m.actions, m.scheduleReads)
	} else {
		// Unregistered metrics are no-ops until registered; create them so
		// that the vectors can be used.
		local := metrics.NewKubeRegistry()
		local.MustRegister(m.serving, m.boundaryLag, m.actions, m.scheduleReads)
	}
	return m
}
