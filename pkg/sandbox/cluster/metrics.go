package cluster

import (
	"net/http"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Jobs of the sandbox's metrics endpoints, named as manifests/monitoring
// expects a Prometheus to name the scrape jobs of an install.
const (
	JobScheduler          = "rota-scheduler"
	JobScheduleController = "rota-schedule-controller"
	JobDriver             = "rota-dra-kubelet-plugin"
)

// MetricsEndpoint is one /metrics a Prometheus would scrape in an
// install: the handler the component serves, and the job and instance
// labels the scrape would add.
type MetricsEndpoint struct {
	Job, Instance string
	Handler       http.Handler
}

// MetricsEndpoints are the sandbox's components' /metrics handlers: the
// scheduler's (component-base's legacy registry, which in this one process
// also holds the controllers' work queue metrics), schedule-controller's,
// and every node's driver's.
func (c *Cluster) MetricsEndpoints() []MetricsEndpoint {
	eps := []MetricsEndpoint{
		{Job: JobScheduler, Instance: "scheduler", Handler: legacyregistry.Handler()},
		{Job: JobScheduleController, Instance: "schedule-controller", Handler: metrics.HandlerFor(c.Registry, metrics.HandlerOpts{})},
	}
	for _, n := range c.Nodes {
		eps = append(eps, MetricsEndpoint{Job: JobDriver, Instance: n.Name, Handler: n.Plugin.Metrics.Handler()})
	}
	return eps
}
