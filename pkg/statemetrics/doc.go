// Package statemetrics exports the state of Rota's objects as Prometheus
// gauges for alerts and dashboards (manifests/monitoring): the GPUs of the
// pool per node, model and state, the pods waiting per reason, the
// DeploySchedule targets per phase and reason, and the GPUReservation
// conditions. Every value is computed from informer caches when the
// registry is scraped; nothing is kept between scrapes.
package statemetrics
