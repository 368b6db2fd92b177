package integration

import (
	"testing"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestDriverMetricsSecure: with --metrics-secure the plugin serves
// /metrics over TLS as kube components do: an anonymous request gets 401,
// a ServiceAccount the API server authenticates but RBAC does not allow
// gets 403, and one bound to a role with get on /metrics gets the metrics.
// The API server authorizes with RBAC.
func TestDriverMetricsSecure(t *testing.T) {
	cp := framework.StartControlPlaneWith(t, framework.ControlPlaneOptions{APIServerFlags: []string{"--authorization-mode=RBAC"}})
	cp.Create(t, framework.DeviceClass(), framework.Namespace("monitoring"))
	n := startGPUNode(t, cp, "node-metrics", "l4x2", func(n *gpuNode) {
		n.opts.MetricsAddress, n.opts.MetricsSecure = "127.0.0.1:0", true
	})
	prometheus, stranger := metricsReaders(t, cp)
	checkSecureMetrics(t, n.plugin.MetricsAddr, prometheus, stranger, `rota_driver_devices{health="Healthy"} 2`, "rota_driver_devices")
}
