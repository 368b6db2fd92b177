package controlplane

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// recorder is the part of a test's T that checkInvariants reports to.
type recorder struct {
	testing.TB
	errors []string
	logs   []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, format)
}
func (r *recorder) Logf(format string, args ...any) { r.logs = append(r.logs, format) }

const mismatch = "# TYPE apiserver_validation_declarative_validation_mismatch_total counter\n" +
	"apiserver_validation_declarative_validation_mismatch_total %d\n"

// metricsServer answers /metrics with body, after hanging the first
// `hang` scrapes until the client gives up.
func metricsServer(t *testing.T, hang int32, body string) (*httptest.Server, *atomic.Int32) {
	var scrapes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		if scrapes.Add(1) <= hang {
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &scrapes
}

// A scrape that times out (5 s, kube-apiserver's test server's own limit)
// is tried again and the check passes on healthy metrics.
func TestInvariantCheckRetriesAScrapeThatTimedOut(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out one 5 s scrape timeout")
	}
	srv, scrapes := metricsServer(t, 1, strings.ReplaceAll(mismatch, "%d", "0"))
	r := &recorder{TB: t}
	checkInvariants(r, &rest.Config{Host: srv.URL})
	if len(r.errors) != 0 {
		t.Errorf("check failed on healthy metrics after one timed-out scrape: %v", r.errors)
	}
	if got := scrapes.Load(); got != 2 {
		t.Errorf("%d scrapes, want 2 (one timed out, one answered)", got)
	}
}

// A metric that breaks an invariant fails the check at the first scrape.
func TestInvariantCheckFailsOnABrokenInvariant(t *testing.T) {
	srv, scrapes := metricsServer(t, 0, strings.ReplaceAll(mismatch, "%d", "3"))
	r := &recorder{TB: t}
	checkInvariants(r, &rest.Config{Host: srv.URL})
	if len(r.errors) != 1 {
		t.Errorf("errors %v, want the invariant failure", r.errors)
	}
	if got := scrapes.Load(); got != 1 {
		t.Errorf("%d scrapes, want 1: a broken invariant is not retried", got)
	}
}
