package statemetrics

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics"

	"github.com/rota-dev/rota/pkg/waits"
)

type nsReason struct{ namespace, reason string }

type waitAgg struct {
	pods   int
	oldest float64 // creation time, Unix seconds
}

// collectWaiting exports rota_admission_waiting_pods and
// rota_admission_waiting_since_timestamp_seconds from the pods whose
// rota.dev/Waiting condition is True. Pods that ended or are being deleted
// wait for nothing and are left out.
func (c *Collector) collectWaiting(ch chan<- metrics.Metric) {
	if c.l.Pods == nil {
		return
	}
	pods, err := c.l.Pods.List(labels.Everything())
	if err != nil {
		return
	}
	agg := map[nsReason]*waitAgg{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		cond := waits.Current(p)
		if cond == nil || cond.Status != v1.ConditionTrue {
			continue
		}
		k := nsReason{p.Namespace, cond.Reason}
		created := float64(p.CreationTimestamp.Unix())
		a := agg[k]
		if a == nil {
			a = &waitAgg{oldest: created}
			agg[k] = a
		}
		a.pods++
		a.oldest = min(a.oldest, created)
	}
	for k, a := range agg {
		ch <- metrics.NewLazyConstMetric(c.waitingPods, metrics.GaugeValue, float64(a.pods), k.namespace, k.reason)
		ch <- metrics.NewLazyConstMetric(c.waitingSince, metrics.GaugeValue, a.oldest, k.namespace, k.reason)
	}
}
