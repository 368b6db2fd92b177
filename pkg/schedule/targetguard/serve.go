package targetguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/klog/v2"
)

// Serve serves h over TLS on ln until ctx ends, with the key pair
// tls.crt and tls.key of certDir (a mounted Secret of EnsureCerts). It
// waits for the files to appear, since the certificate Job may run after
// the controller starts, and picks up a renewed pair without a restart.
func Serve(ctx context.Context, ln net.Listener, certDir string, h http.Handler) error {
	logger := klog.FromContext(ctx)
	certFile, keyFile := filepath.Join(certDir, CertKey), filepath.Join(certDir, KeyKey)
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(context.Context) (bool, error) {
		_, errCert := os.Stat(certFile)
		_, errKey := os.Stat(keyFile)
		return errCert == nil && errKey == nil, nil
	})
	if err != nil {
		_ = ln.Close()
		return nil //nolint:nilerr // ctx ended before the certificate came: nothing to serve.
	}
	content, err := dynamiccertificates.NewDynamicServingContentFromFiles("rota-schedule-controller-webhook", certFile, keyFile)
	if err != nil {
		return fmt.Errorf("webhook serving certificate: %w", err)
	}
	go content.Run(ctx, 1)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			certPEM, keyPEM := content.CurrentCertKeyContent()
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return nil, fmt.Errorf("webhook serving certificate: %w", err)
			}
			return &cert, nil
		},
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         cfg,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          klog.NewStandardLogger("WARNING"),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("Serving the target webhook", "address", ln.Addr().String(), "path", Path)
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook server: %w", err)
	}
	return nil
}
