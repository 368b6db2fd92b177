package statemetrics

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// collectReservations exports rota_reservation_status_condition: every
// condition of every GPUReservation, 1 when True.
func (c *Collector) collectReservations(ch chan<- metrics.Metric, reservations []rotav1.GPUReservation) {
	for _, r := range reservations {
		for _, cond := range r.Status.Conditions {
			v := 0.0
			if cond.Status == metav1.ConditionTrue {
				v = 1
			}
			ch <- metrics.NewLazyConstMetric(c.reservationConds, metrics.GaugeValue, v, r.Namespace, r.Name, cond.Type, cond.Reason)
		}
	}
}
