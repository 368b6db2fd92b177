package integration

import (
	"fmt"
	"net/http"
	"strings"
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
	get := func(bearer string) (int, string) { return getSecureMetrics(t, n.plugin.MetricsAddr, bearer) }
	for _, c := range []struct {
		who, token string
		want       int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"a token the API server does not know", "not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without get on /metrics", stranger, http.StatusForbidden},
	} {
		if code, body := get(c.token); code != c.want {
			t.Errorf("%s: %d %q, want %d", c.who, code, body, c.want)
		}
	}
	code, body := get(prometheus)
	if code != http.StatusOK || !strings.Contains(body, `rota_driver_devices{health="Healthy"} 2`) {
		t.Errorf("the prometheus ServiceAccount: %d, body %s", code, fmt.Sprintf("%.300q", body))
	}
	// Plain HTTP is not served on that port.
	if resp, err := http.Get("http://" + n.plugin.MetricsAddr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP /metrics answered 200")
		}
	}
}
