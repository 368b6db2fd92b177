package controlplane

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/test/e2e/invariants/metrics"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// invariantScrapes is how many times checkInvariants scrapes kube-apiserver's
// metrics before it gives up on a scrape that times out.
const invariantScrapes = 4

// checkInvariants is the check kube-apiserver's test server makes of its
// invariant metrics when it is torn down, with one difference: the test
// server scrapes /metrics once with a 5 s timeout, which a loaded 2-core
// machine (the race detector, two packages' control planes at once) can
// miss, failing a test that broke nothing. A scrape that timed out is
// retried here; a metric that breaks an invariant still fails t at once.
func checkInvariants(t ktesting.TB, cfg *rest.Config) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Errorf("Invariant check: client for kube-apiserver: %v", err)
		return
	}
	for i := 1; ; i++ {
		err = metrics.CheckMetricInvariants(context.Background(), client, false)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || i == invariantScrapes {
			break
		}
		t.Logf("Invariant check: scrape %d of %d timed out, trying again: %v", i, invariantScrapes, err)
	}
	if err != nil {
		t.Errorf("Invariant check of kube-apiserver's metrics failed: %v", fmt.Errorf("after %d scrapes at most: %w", invariantScrapes, err))
	}
}
