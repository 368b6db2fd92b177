package evictor

import (
	"k8s.io/component-base/metrics"
)

// CheckpointOutcome is what became of a victim's checkpoint: the outcome
// label of rota_reclaim_checkpoints_total.
type CheckpointOutcome string

const (
	// Acknowledged: the pod acknowledged within its grace.
	Acknowledged CheckpointOutcome = "acknowledged"
	// GraceExpired: no acknowledgement within the grace; evicted anyway.
	GraceExpired CheckpointOutcome = "grace_expired"
	// Undeclared: the pod declares no checkpoint; evicted at once.
	Undeclared CheckpointOutcome = "undeclared"
	// Invalid: the declaration does not parse; evicted at once.
	Invalid CheckpointOutcome = "invalid"
)

// EvictionResult is what became of a victim's eviction: the result label
// of rota_reclaim_evictions_total.
type EvictionResult string

const (
	// Evicted: the API server accepted the eviction.
	Evicted EvictionResult = "evicted"
	// PDBBlocked: a PodDisruptionBudget refused it on every try.
	PDBBlocked EvictionResult = "pdb_blocked"
	// Gone: the pod was gone, replaced (another UID) or already
	// terminating; nothing to evict.
	Gone EvictionResult = "gone"
	// Error: an API error other than those; not evicted.
	Error EvictionResult = "error"
)

// Metrics are the evictor's Prometheus metrics.
type Metrics struct {
	checkpoints *metrics.CounterVec
	evictions   *metrics.CounterVec
}

// NewMetrics creates the metrics and registers them in reg (nil: a
// registry of their own, for callers that serve none).
func NewMetrics(reg metrics.KubeRegistry) *Metrics {
	if reg == nil {
		reg = metrics.NewKubeRegistry()
	}
	return NewMetricsFunc(reg.MustRegister)
}

// NewMetricsFunc creates the metrics and registers them with
// mustRegister, such as legacyregistry.MustRegister for a component that
// serves the legacy registry (kube-scheduler): call it once per process
// and share the result (Options.Metrics).
func NewMetricsFunc(mustRegister func(...metrics.Registerable)) *Metrics {
	m := &Metrics{
		checkpoints: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: "rota", Subsystem: "reclaim", Name: "checkpoints_total",
			Help: "Checkpoints of pods evicted for a reclaim, by outcome: acknowledged, grace_expired, undeclared " +
				"(the pod declares no checkpoint) or invalid (a declaration that does not parse).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"outcome"}),
		evictions: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: "rota", Subsystem: "reclaim", Name: "evictions_total",
			Help: "Evictions for a reclaim, by result: evicted, pdb_blocked (a PodDisruptionBudget refused every try), " +
				"gone (the pod was gone, replaced or terminating) or error.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"result"}),
	}
	mustRegister(m.checkpoints, m.evictions)
	return m
}

func (m *Metrics) checkpoint(o CheckpointOutcome) { m.checkpoints.WithLabelValues(string(o)).Inc() }
func (m *Metrics) eviction(r EvictionResult)      { m.evictions.WithLabelValues(string(r)).Inc() }
