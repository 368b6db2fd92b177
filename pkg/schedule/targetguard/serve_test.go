package targetguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestServePicksUpARenewedCertificate: the webhook serves the pair of its
// certificate directory once it appears, and a renewed pair (the Secret
// volume updated by the kubelet) without a restart.
func TestServePicksUpARenewedCertificate(t *testing.T) {
	client, clk, o := certFixture(t)
	o.ExtraHosts = []string{"127.0.0.1"}
	dir := t.TempDir()
	write := func() []byte {
		t.Helper()
		if _, err := EnsureCerts(t.Context(), client, o); err != nil {
			t.Fatal(err)
		}
		s, _ := state(t, client)
		for _, k := range []string{CertKey, KeyKey} {
			tmp := filepath.Join(dir, k+".tmp")
			if err := os.WriteFile(tmp, s.Data[k], 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, k)); err != nil {
				t.Fatal(err)
			}
		}
		return s.Data[CAKey]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, dir, http.NotFoundHandler()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	served := func(ca []byte) (*x509.Certificate, error) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "webhook.rota-system.svc", MinVersion: tls.VersionTLS12, Time: clk.Now})
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	waitServed := func(what string, ca []byte, want func(*x509.Certificate) bool) {
		t.Helper()
		var last error
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			c, err := served(ca)
			last = err
			return err == nil && want(c), nil
		})
		if err != nil {
			t.Fatalf("%s: %v (last handshake: %v)", what, err, last)
		}
	}

	ca := write()
	s, _ := state(t, client)
	first := mustParse(t, s.Data[CertKey])[0]
	waitServed("the first certificate", ca, func(c *x509.Certificate) bool { return c.SerialNumber.Cmp(first.SerialNumber) == 0 })

	clk.Step(first.NotAfter.Sub(clk.Now()) - 24*time.Hour)
	ca = write()
	s, _ = client.CoreV1().Secrets("rota-system").Get(t.Context(), "tls", metav1.GetOptions{})
	renewed := mustParse(t, s.Data[CertKey])[0]
	if renewed.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("no renewal to serve")
	}
	waitServed("the renewed certificate", ca, func(c *x509.Certificate) bool { return c.SerialNumber.Cmp(renewed.SerialNumber) == 0 })
}
