package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
)

// TestMetricsListenOnLoopbackByDefault: run's defaults keep /metrics, whose
// labels name tenants' namespaces and schedules, on the pod's loopback,
// and the kubelet's probes on their own port.
func TestMetricsListenOnLoopbackByDefault(t *testing.T) {
	cmd := newRunCommand()
	for flag, want := range map[string]string{
		"metrics-bind-address":      "127.0.0.1:8080",
		"metrics-secure":            "false",
		"health-probe-bind-address": ":8081",
	} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s defaults to %q, want %q", flag, got, want)
		}
	}
}

// TestProbesDiscloseNothing: the probes' address answers "ok" on /healthz
// and /readyz and serves no metrics; /metrics is on its own address.
func TestProbesDiscloseNothing(t *testing.T) {
	ctx := context.Background()
	reg := metrics.NewKubeRegistry()
	c := metrics.NewCounter(&metrics.CounterOpts{Name: "rota_schedule_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	e, err := ServeEndpoints(ctx, EndpointOptions{MetricsAddress: "127.0.0.1:0", HealthAddress: "127.0.0.1:0"}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	get := func(addr, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(e.Health, path); code != http.StatusOK || body != "ok" {
			t.Errorf("%s: %d %q, want 200 \"ok\"", path, code, body)
		}
	}
	for _, path := range []string{"/metrics", "/debug/pprof/", "/configz"} {
		if code, _ := get(e.Health, path); code != http.StatusNotFound {
			t.Errorf("%s on the probes' address: %d, want 404", path, code)
		}
	}
	if code, body := get(e.Metrics, "/metrics"); code != http.StatusOK || !strings.Contains(body, "rota_schedule_test_total 1") {
		t.Errorf("/metrics: %d %.200q", code, body)
	}
	if code, _ := get(e.Metrics, "/healthz"); code != http.StatusNotFound {
		t.Errorf("/healthz on the metrics address: %d, want 404", code)
	}
}
