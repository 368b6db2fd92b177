// Package monitoring checks the operations kit (manifests/monitoring): every
// alert and dashboard query is evaluated by Prometheus's PromQL engine
// against the metrics scraped from sandbox scenarios.
package monitoring
