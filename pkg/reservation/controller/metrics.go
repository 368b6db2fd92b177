package controller

import (
	"fmt"

	"k8s.io/component-base/metrics"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// controllerMetrics are the controller's Prometheus metrics, registered in
// the binary's registry (none in tests that do not ask).
type controllerMetrics struct {
	heldGPUs    *metrics.GaugeVec
	memoryUsed  *metrics.GaugeVec
	phaseChange *metrics.CounterVec
}

func newMetrics() *controllerMetrics {
	return &controllerMetrics{
		heldGPUs: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Subsystem: "rota_reservation", Name: "held_gpus",
			Help:           "GPUs a GPUReservation holds, by namespace and reservation.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace", "reservation"}),
		memoryUsed: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Subsystem: "rota_reservation", Name: "member_memory_mebibytes",
			Help:           "Σ memoryMiB declared by a reservation's members bound to its node.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace", "reservation"}),
		phaseChange: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: "rota_reservation", Name: "phase_changes_total",
			Help:           "Phase changes of GPUReservations, by new phase.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"phase"}),
	}
}

func (m *controllerMetrics) register(r metrics.KubeRegistry) error {
	for _, c := range []metrics.Registerable{m.heldGPUs, m.memoryUsed, m.phaseChange} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering reservation metrics: %w", err)
		}
	}
	return nil
}

// observe records a reservation's status; forget drops a deleted one.
func (m *controllerMetrics) observe(res *rotav1.GPUReservation, st *rotav1.GPUReservationStatus) {
	m.heldGPUs.WithLabelValues(res.Namespace, res.Name).Set(float64(st.GPUCount))
	var mem int64
	for _, ms := range st.Members {
		mem += ms.MemoryMiB
	}
	m.memoryUsed.WithLabelValues(res.Namespace, res.Name).Set(float64(mem))
	if st.Phase != res.Status.Phase {
		m.phaseChange.WithLabelValues(string(st.Phase)).Inc()
	}
}

func (m *controllerMetrics) forget(namespace, name string) {
	m.heldGPUs.DeleteLabelValues(namespace, name)
	m.memoryUsed.DeleteLabelValues(namespace, name)
}
