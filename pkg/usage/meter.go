package usage

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
)

// Meter integrates holdings over time into reservation-hours and
// GPU-hours per tenant and model. Between two observations the holdings of
// the earlier one are taken to have lasted (the counters lag by at most one
// period); the first observation only sets the baseline.
type Meter struct {
	reservationHours *metrics.CounterVec
	gpuHours         *metrics.CounterVec

	mu      sync.Mutex
	last    time.Time
	current map[Key]Holding
}

// NewMeter returns a meter with unregistered counters.
func NewMeter() *Meter {
	return &Meter{
		reservationHours: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: "rota_usage", Name: "reservation_gpu_hours_total",
			Help:           "GPU-hours held by GPUReservations, by tenant (namespace) and GPU model, whether members ran or not.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace", "model"}),
		gpuHours: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: "rota_usage", Name: "gpu_hours_total",
			Help:           "GPU-hours charged to a tenant (namespace), by GPU model: its reservations' GPUs once, plus the other GPUs its claims are allocated; members of a reservation add nothing.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace", "model"}),
	}
}

// Register adds the counters to r.
func (m *Meter) Register(r metrics.KubeRegistry) error {
	for _, c := range []metrics.Registerable{m.reservationHours, m.gpuHours} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering usage metrics: %w", err)
		}
	}
	return nil
}

// Observe charges the holdings of the previous observation for the time
// since, and keeps h for the next. An observation earlier than the
// previous one charges nothing.
func (m *Meter) Observe(now time.Time, h map[Key]Holding) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.last.IsZero() && now.After(m.last) {
		hours := now.Sub(m.last).Hours()
		for k, held := range m.current {
			if held.Reserved > 0 {
				m.reservationHours.WithLabelValues(k.Namespace, k.Model).Add(float64(held.Reserved) * hours)
			}
			if held.Charged > 0 {
				m.gpuHours.WithLabelValues(k.Namespace, k.Model).Add(float64(held.Charged) * hours)
			}
		}
	}
	if m.last.IsZero() || now.After(m.last) {
		m.last = now
	}
	m.current = h
}
