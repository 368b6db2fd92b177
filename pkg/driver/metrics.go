package driver

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/component-base/metrics"

	"github.com/rota-dev/rota/pkg/driver/health"
)

// Metrics are the driver's Prometheus metrics in a registry of its own.
type Metrics struct {
	Registry metrics.KubeRegistry

	prepareDuration   *metrics.HistogramVec
	unprepareDuration *metrics.HistogramVec
	devices           *metrics.GaugeVec
	batchClaims       *metrics.Histogram
	checkpointWrites  *metrics.Counter
	healthChanges     *metrics.CounterVec

	// mu guards lastHealth, each GPU's state (by index) at the last
	// publish, from which healthChanges counts.
	mu         sync.Mutex
	lastHealth map[int]health.State
}

// NewMetrics creates and registers the metrics.
func NewMetrics() *Metrics {
	buckets := metrics.ExponentialBuckets(0.0005, 2, 16) // 0.5ms … 16s
	m := &Metrics{
		Registry: metrics.NewKubeRegistry(),
		prepareDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Namespace: "rota", Subsystem: "driver", Name: "prepare_duration_seconds",
			Help:    "Time to prepare one ResourceClaim, by result.",
			Buckets: buckets, StabilityLevel: metrics.ALPHA,
		}, []string{"result"}),
		unprepareDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Namespace: "rota", Subsystem: "driver", Name: "unprepare_duration_seconds",
			Help:    "Time to unprepare one ResourceClaim, by result.",
			Buckets: buckets, StabilityLevel: metrics.ALPHA,
		}, []string{"result"}),
		devices: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: "rota", Subsystem: "driver", Name: "devices",
			Help:           "GPUs published by this driver, by health (Healthy, Degraded, Unhealthy).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"health"}),
		batchClaims: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: "rota", Subsystem: "driver", Name: "batch_claims",
			Help:    "Claims prepared or unprepared together, sharing checkpoint writes.",
			Buckets: metrics.ExponentialBuckets(1, 2, 8), StabilityLevel: metrics.ALPHA,
		}),
		checkpointWrites: metrics.NewCounter(&metrics.CounterOpts{
			Namespace: "rota", Subsystem: "driver", Name: "checkpoint_writes_total",
			Help:           "Fsynced writes of the prepared-claims checkpoint.",
			StabilityLevel: metrics.ALPHA,
		}),
		healthChanges: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: "rota", Subsystem: "driver", Name: "device_health_changes_total",
			Help: "Changes of a GPU's published health, by the state before (from), after (to) and the reason of the new " +
				"state (the taint value: xid-79, gpu-lost, ecc, …; empty when healthy).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"from", "to", "reason"}),
		lastHealth: map[int]health.State{},
	}
	m.Registry.MustRegister(m.prepareDuration, m.unprepareDuration, m.devices, m.batchClaims, m.checkpointWrites, m.healthChanges)
	return m
}

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return metrics.HandlerFor(m.Registry, metrics.HandlerOpts{})
}

func resultLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}

func (m *Metrics) observePrepare(d time.Duration, err error) {
	m.prepareDuration.WithLabelValues(resultLabel(err)).Observe(d.Seconds())
}

func (m *Metrics) observeUnprepare(d time.Duration, err error) {
	m.unprepareDuration.WithLabelValues(resultLabel(err)).Observe(d.Seconds())
}

// ObserveBatch records the size of one prepare or unprepare batch.
func (m *Metrics) ObserveBatch(claims int) { m.batchClaims.Observe(float64(claims)) }

// ObserveCheckpointWrite counts one checkpoint write.
func (m *Metrics) ObserveCheckpointWrite() { m.checkpointWrites.Inc() }

// setDevices sets the devices gauge from the statuses being published and
// counts each GPU whose state differs from the last publish (a GPU's first
// publish is not a change).
func (m *Metrics) setDevices(statuses map[int]health.Status) {
	counts := map[health.State]int{health.Healthy: 0, health.Degraded: 0, health.Unhealthy: 0}
	m.mu.Lock()
	defer m.mu.Unlock()
	for idx, st := range statuses {
		s := st.State
		if s == "" {
			s = health.Healthy
		}
		counts[s]++
		if before, seen := m.lastHealth[idx]; seen && before != s {
			m.healthChanges.WithLabelValues(string(before), string(s), st.Reason).Inc()
		}
		m.lastHealth[idx] = s
	}
	for s, n := range counts {
		m.devices.WithLabelValues(string(s)).Set(float64(n))
	}
}
