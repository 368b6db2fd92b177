package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/secureserving"
)

// EndpointOptions say where the controller serves what.
type EndpointOptions struct {
	// MetricsAddress serves /metrics; empty serves none. Loopback by
	// default: the metrics carry tenants' namespace and schedule names.
	MetricsAddress string
	// MetricsSecure serves /metrics over TLS to callers the API server
	// authenticates and authorizes (pkg/secureserving).
	MetricsSecure bool
	// HealthAddress serves /healthz and /readyz, which answer "ok" and
	// nothing else; empty serves none.
	HealthAddress string
}

// Endpoints are the addresses the controller listens on ("" when off).
type Endpoints struct {
	Metrics, Health string
	stops           []func()
}

// Stop closes every listener.
func (e *Endpoints) Stop() {
	for _, stop := range e.stops {
		stop()
	}
}

// ServeEndpoints starts the listeners of o until Stop; client is for
// --metrics-secure's TokenReviews and SubjectAccessReviews.
func ServeEndpoints(ctx context.Context, o EndpointOptions, reg metrics.KubeRegistry, client kubernetes.Interface) (*Endpoints, error) {
	e := &Endpoints{}
	if o.HealthAddress != "" {
		health := http.NewServeMux()
		ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
		health.HandleFunc("/healthz", ok)
		health.HandleFunc("/readyz", ok)
		addr, stop, err := serve(ctx, o.HealthAddress, health, nil)
		if err != nil {
			return nil, fmt.Errorf("health probes: %w", err)
		}
		e.Health, e.stops = addr, append(e.stops, stop)
	}
	if o.MetricsAddress != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.HandlerFor(reg, metrics.HandlerOpts{}))
		var h http.Handler = mux
		var tlsConfig *tls.Config
		if o.MetricsSecure {
			var err error
			if h, tlsConfig, err = secureserving.Metrics(h, client, "rota-schedule-controller"); err != nil {
				e.Stop()
				return nil, err
			}
		}
		addr, stop, err := serve(ctx, o.MetricsAddress, h, tlsConfig)
		if err != nil {
			e.Stop()
			return nil, fmt.Errorf("metrics: %w", err)
		}
		e.Metrics, e.stops = addr, append(e.stops, stop)
		if !o.MetricsSecure && !secureserving.Loopback(addr) {
			klog.FromContext(ctx).Info("Serving /metrics, which names tenants' namespaces and schedules, without authentication beyond this host; restrict who can reach it (a NetworkPolicy) or use --metrics-secure", "address", addr)
		}
	}
	return e, nil
}

// serve listens on addr and serves h, over TLS when tlsConfig is set; it
// returns the address it listens on and how to stop it.
func serve(ctx context.Context, addr string, h http.Handler, tlsConfig *tls.Config) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}, nil
}
