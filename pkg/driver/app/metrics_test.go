package app

import "testing"

// TestMetricsListenOnLoopbackByDefault: unauthenticated /metrics stays on
// the loopback interface unless the operator widens it.
func TestMetricsListenOnLoopbackByDefault(t *testing.T) {
	if got := DefaultOptions().MetricsAddress; !loopback(got) {
		t.Errorf("default --metrics-address %q is not a loopback address", got)
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:8081": true, "[::1]:8081": true, "localhost:8081": true,
		":8081": false, "0.0.0.0:8081": false, "10.0.0.5:8081": false, "[::]:8081": false, "garbage": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
