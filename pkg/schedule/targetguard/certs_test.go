package targetguard

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
	testingclock "k8s.io/utils/clock/testing"
)

func certFixture(t *testing.T) (*fake.Clientset, *testingclock.FakeClock, CertOptions) {
	t.Helper()
	client := fake.NewClientset(&admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "targets"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "targets.rota.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "rota-system", Name: "webhook"}}},
			{Name: "other.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "other", Name: "webhook"}}},
		},
	})
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC))
	return client, clk, CertOptions{Namespace: "rota-system", SecretName: "tls", ServiceName: "webhook", WebhookName: "targets", Clock: clk}
}

// state reads back what a client sees: the Secret's pair, its CAs and the
// webhooks' caBundles.
func state(t *testing.T, client *fake.Clientset) (*corev1.Secret, [][]byte) {
	t.Helper()
	ctx := context.Background()
	s, err := client.CoreV1().Secrets("rota-system").Get(ctx, "tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "targets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bundles [][]byte
	for _, w := range cfg.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return s, bundles
}

// verify checks that the Secret's serving certificate is trusted by the
// webhook's caBundle for the Service's name at now.
func verify(t *testing.T, s *corev1.Secret, bundle []byte, now time.Time) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(s.Data[CertKey])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("the caBundle holds no certificate")
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "webhook.rota-system.svc", CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("the API server would not trust the serving certificate: %v", err)
	}
	return certs[0]
}

// TestEnsureCertsIssuesOnceThenRenews: the first run issues a CA and a
// serving certificate the webhook trusts, and leaves other webhooks alone;
// a second run changes nothing; the serving certificate is renewed when a
// third of its life is left, under the same CA; a CA in its last year is
// replaced while the old one stays trusted.
func TestEnsureCertsIssuesOnceThenRenews(t *testing.T) {
	ctx := context.Background()
	client, clk, o := certFixture(t)
	res, err := EnsureCerts(ctx, client, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IssuedCA || !res.IssuedCert || !res.CABundleUpdated {
		t.Fatalf("first run: %+v, want a CA, a certificate and the caBundle", res)
	}
	s, bundles := state(t, client)
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	first := verify(t, s, bundles[0], clk.Now())
	if len(bundles[1]) != 0 {
		t.Errorf("the webhook calling another Service got a caBundle")
	}

	res, err = EnsureCerts(ctx, client, o)
	if err != nil || res.IssuedCA || res.IssuedCert || res.CABundleUpdated {
		t.Fatalf("second run: %+v, %v; want nothing changed", res, err)
	}

	clk.Step(first.NotAfter.Sub(clk.Now()) - 100*24*time.Hour)
	res, err = EnsureCerts(ctx, client, o)
	if err != nil || res.IssuedCA || !res.IssuedCert || res.CABundleUpdated {
		t.Fatalf("100 days before expiry: %+v, %v; want a new certificate under the same CA", res, err)
	}
	s, bundles = state(t, client)
	if renewed := verify(t, s, bundles[0], clk.Now()); !renewed.NotAfter.After(first.NotAfter) {
		t.Errorf("renewed certificate expires %v, not after the first's %v", renewed.NotAfter, first.NotAfter)
	}

	cas, _ := certutil.ParseCertsPEM(s.Data[CAKey])
	clk.Step(cas[0].NotAfter.Sub(clk.Now()) - 200*24*time.Hour)
	res, err = EnsureCerts(ctx, client, o)
	if err != nil || !res.IssuedCA || !res.IssuedCert || !res.CABundleUpdated {
		t.Fatalf("CA in its last year: %+v, %v; want a new CA and certificate", res, err)
	}
	s, bundles = state(t, client)
	verify(t, s, bundles[0], clk.Now())
	if got, _ := certutil.ParseCertsPEM(bundles[0]); len(got) != 2 {
		t.Errorf("caBundle holds %d CAs, want the new and the old", len(got))
	}
	clk.Step(201 * 24 * time.Hour)
	if _, err = EnsureCerts(ctx, client, o); err != nil {
		t.Fatal(err)
	}
	if _, bundles = state(t, client); len(mustParse(t, bundles[0])) != 1 {
		t.Errorf("the expired CA is still in the caBundle")
	}
}

func mustParse(t *testing.T, pemBytes []byte) []*x509.Certificate {
	t.Helper()
	c, err := certutil.ParseCertsPEM(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEnsureCertsRepairsAndRefuses: a Secret whose contents do not parse
// or do not belong together is issued anew, not trusted; a missing webhook
// configuration, or one with no webhook calling the Service, is an error.
func TestEnsureCertsRepairsAndRefuses(t *testing.T) {
	ctx := context.Background()
	client, clk, o := certFixture(t)
	if _, err := EnsureCerts(ctx, client, o); err != nil {
		t.Fatal(err)
	}
	s, _ := state(t, client)
	other, _, _ := certFixture(t)
	if _, err := EnsureCerts(ctx, other, o); err != nil {
		t.Fatal(err)
	}
	foreign, _ := state(t, other)
	for name, corrupt := range map[string]func(map[string][]byte){
		"garbage certificate": func(d map[string][]byte) { d[CertKey] = []byte("not PEM") },
		"key of another pair": func(d map[string][]byte) { d[KeyKey] = foreign.Data[KeyKey] },
		"CA of another issue": func(d map[string][]byte) { d[CAKey], d[caKeyKey] = foreign.Data[CAKey], foreign.Data[caKeyKey] },
		"CA key missing":      func(d map[string][]byte) { delete(d, caKeyKey) },
	} {
		t.Run(name, func(t *testing.T) {
			broken := s.DeepCopy()
			corrupt(broken.Data)
			if _, err := client.CoreV1().Secrets("rota-system").Update(ctx, broken, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			res, err := EnsureCerts(ctx, client, o)
			if err != nil || !res.IssuedCert {
				t.Fatalf("%+v, %v; want a new serving certificate", res, err)
			}
			got, bundles := state(t, client)
			verify(t, got, bundles[0], clk.Now())
		})
	}
	o.WebhookName = "missing"
	if _, err := EnsureCerts(ctx, client, o); err == nil {
		t.Error("no error for a missing webhook configuration")
	}
	o.WebhookName, o.ServiceName = "targets", "renamed"
	if _, err := EnsureCerts(ctx, client, o); err == nil {
		t.Error("no error for a configuration with no webhook calling the Service")
	}
}
