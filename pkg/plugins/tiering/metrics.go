package tiering

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/rota-dev/rota/pkg/waits"
)

const metricsSubsystem = "rota_tiering"

// pluginMetrics are Tiering's Prometheus metrics, served on the
// scheduler's /metrics endpoint through component-base's legacy registry.
type pluginMetrics struct {
	placements      *metrics.CounterVec
	firstChoice     *metrics.CounterVec
	rejections      *metrics.CounterVec
	healthRechecks  *metrics.CounterVec
	bindingFailures *metrics.CounterVec
	timeToPlacement *metrics.Histogram
	prunedNodes     *metrics.Counter
}

// newMetrics builds an unregistered set; tests use it directly.
func newMetrics() *pluginMetrics {
	return &pluginMetrics{
		placements: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "placements_total",
			Help:           "Pods placed with tiered claims, by 1-based tier, granted device model and namespace. The fallback ratio is the share with tier > 1.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"tier", "model", "namespace"}),
		firstChoice: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: metricsSubsystem,
			Name:      "first_choice_placements_total",
			Help: "Placed tiered requests by the device model of their first tier (first_choice; unknown when it could not be counted), " +
				"the model granted, and outcome (first: the first tier was granted; fallback). Per first_choice, the share with outcome first " +
				"is how often the policy gave pods their best tier.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"first_choice", "granted", "outcome"}),
		rejections: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "rejections_total",
			Help:           "Node and tier rejections explained for pods that could not be placed, by reason.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"reason"}),
		healthRechecks: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "health_rechecks_total",
			Help:           "Re-checks of granted devices at Reserve and PreBind, by result (ok, tainted, gone).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"result"}),
		bindingFailures: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "binding_failures_total",
			Help:           "Placements of tiered pods that could not be bound, by cause (BindingConflict, StaleResourceSlice, NodeLost, DeviceTainted, BindError) and stage (reserve, prebind, bind).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"cause", "stage"}),
		timeToPlacement: metrics.NewHistogram(&metrics.HistogramOpts{
			Subsystem:      metricsSubsystem,
			Name:           "time_to_placement_seconds",
			Help:           "Time from pod creation to the binding of a pod with tiered claims.",
			Buckets:        metrics.ExponentialBuckets(0.01, 2, 16),
			StabilityLevel: metrics.ALPHA,
		}),
		prunedNodes: metrics.NewCounter(&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "pruned_nodes_total",
			Help:           "Nodes that Tiering's Filter rejected because a node of a better tier was known to pass every filter (tier-aware pruning): no other Filter plugin visited them.",
			StabilityLevel: metrics.ALPHA,
		}),
	}
}

var (
	registerOnce sync.Once
	registered   *pluginMetrics
)

// registerMetrics registers the metrics once per process: every profile
// (and every scheduler a test starts) shares them, as Prometheus requires.
func registerMetrics() *pluginMetrics {
	registerOnce.Do(func() {
		registered = newMetrics()
		legacyregistry.MustRegister(registered.placements, registered.firstChoice, registered.rejections, registered.healthRechecks, registered.bindingFailures, registered.timeToPlacement, registered.prunedNodes)
		registered.initBindingFailures()
	})
	return registered
}

// bindingFailureSeries are the (cause, stage) pairs a placement can fail
// to bind with: the re-check of Reserve and PreBind finds the node or a
// device gone or tainted; the Binding write fails.
var bindingFailureSeries = [][2]string{
	{string(waits.NodeLost), stageReserve}, {string(waits.StaleResourceSlice), stageReserve}, {string(waits.DeviceTainted), stageReserve},
	{string(waits.NodeLost), stagePreBind}, {string(waits.StaleResourceSlice), stagePreBind}, {string(waits.DeviceTainted), stagePreBind},
	{string(waits.BindingConflict), stageBind}, {string(waits.BindError), stageBind},
}

// initBindingFailures exports every binding failure series at 0 from the
// start, so that an alert's increase() sees the first failure, and a
// dashboard or alert that names the metric finds it before any failure.
// The metrics must be registered first (unregistered vectors are no-ops).
func (m *pluginMetrics) initBindingFailures() {
	for _, s := range bindingFailureSeries {
		m.bindingFailures.WithLabelValues(s[0], s[1])
	}
}
