package app

import (
	"testing"

	"github.com/rota-dev/rota/pkg/secureserving"
)

// TestMetricsListenOnLoopbackByDefault: unauthenticated /metrics stays on
// the loopback interface unless the operator widens it (which addresses
// count as loopback: secureserving.TestLoopback).
func TestMetricsListenOnLoopbackByDefault(t *testing.T) {
	if got := DefaultOptions().MetricsAddress; !secureserving.Loopback(got) {
		t.Errorf("default --metrics-address %q is not a loopback address", got)
	}
}
