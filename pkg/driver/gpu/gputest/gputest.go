// Package gputest sets up mock-NVML GPUs for tests of the packages that
// consume an inventory.
package gputest

import (
	"testing"

	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/driver/gpu"
)

// Inventory starts a mock NVML with the named profile for node, initialises it
// and discovers its GPUs, failing the test on any error.
func Inventory(tb testing.TB, node, profile string, clk clock.WithTicker) (*gpu.Mock, gpu.Inventory) {
	tb.Helper()
	m, err := gpu.NewMock(node, profile, clk)
	if err != nil {
		tb.Fatal(err)
	}
	if err := gpu.Init(m); err != nil {
		tb.Fatal(err)
	}
	inv, err := gpu.Discover(m)
	if err != nil {
		tb.Fatal(err)
	}
	return m, inv
}
