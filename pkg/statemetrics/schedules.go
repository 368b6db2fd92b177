package statemetrics

import (
	"k8s.io/component-base/metrics"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// collectTargets exports rota_schedule_target_status: one series per
// target of every DeploySchedule, with its phase and reason.
func (c *Collector) collectTargets(ch chan<- metrics.Metric) {
	for _, s := range convertAll[rotav1.DeploySchedule](c.l.Schedules) {
		for _, t := range s.Status.Targets {
			ch <- metrics.NewLazyConstMetric(c.targetStatus, metrics.GaugeValue, 1, s.Namespace, s.Name, t.Name, string(t.Phase), t.Reason)
		}
	}
}
