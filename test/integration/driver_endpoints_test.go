package integration

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestDriverEndpoints checks liveness, readiness (which follows the kubelet's
// registration answer) and the metrics a prepare leaves behind, which are
// served on their own listener, not on the probes' address.
func TestDriverEndpoints(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeviceClass(), framework.Namespace("ml"))
	n := startGPUNode(t, cp, "node-http", "l4x2", func(n *gpuNode) {
		n.opts.HTTPAddress, n.opts.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	})
	getFrom := func(addr, path string) (int, string) { t.Helper(); return httpGet(t, addr, path) }
	get := func(path string) (int, string) { t.Helper(); return getFrom(n.plugin.HTTPAddr, path) }

	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before registration = %d %q, want 503", code, body)
	}
	reg := registerapi.NewRegistrationClient(n.dial(filepath.Join(n.opts.RegistrarDir, "gpu.rota.dev-reg.sock")))
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after registration = %d %q", code, body)
	}

	claim := n.allocatedClaim(ctx, "ml", "m", "", "gpu-0")
	if _, err := n.prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := n.unprepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	// /metrics is not on the probes' address, only on its own listener.
	if code, _ := get("/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the probes' address %s = %d, want 404", n.plugin.HTTPAddr, code)
	}
	_, metrics := getFrom(n.plugin.MetricsAddr, "/metrics")
	for _, want := range []string{
		`rota_driver_prepare_duration_seconds_count{result="success"} 1`,
		`rota_driver_unprepare_duration_seconds_count{result="success"} 1`,
		`rota_driver_devices{health="Healthy"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// httpGet gets http://addr+path and returns the status code and body.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
