package targetguard

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The keys of the Secret EnsureCerts writes (those of a kubernetes.io/tls
// Secret, and the CA bundle beside them).
const (
	CertKey = corev1.TLSCertKey
	KeyKey  = corev1.TLSPrivateKeyKey
	CAKey   = "ca.crt"
)

// Lifetimes: the CA outlives many serving certificates, so that renewing
// one never changes what the API server trusts.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	caRenewal    = 365 * 24 * time.Hour
	certLifetime = 365 * 24 * time.Hour
)

// CertOptions say which Secret, Service and webhook configuration
// EnsureCerts works on.
type CertOptions struct {
	// Namespace of the Secret and the Service.
	Namespace string
	// SecretName is the Secret holding ca.crt, tls.crt and tls.key.
	SecretName string
	// ServiceName is the webhook's Service; the certificate names it.
	ServiceName string
	// WebhookName is the ValidatingWebhookConfiguration whose webhooks
	// calling ServiceName get the CA as caBundle.
	WebhookName string
	// ExtraHosts are further names (DNS names or IP addresses) of the
	// certificate, for a webhook reached by URL.
	ExtraHosts []string
	// Clock decides what "expires soon" means; nil is the real clock.
	Clock clock.PassiveClock
}

// CertResult says what EnsureCerts changed.
type CertResult struct {
	// IssuedCA, IssuedCert: a new CA or serving certificate was written.
	IssuedCA, IssuedCert bool
	// CABundleUpdated: the webhook configuration's caBundle was rewritten.
	CABundleUpdated bool
	// NotAfter is when the serving certificate in the Secret expires.
	NotAfter time.Time
}

// EnsureCerts makes sure the Secret holds a serving certificate for the
// Service, signed by a CA of its own, with at least a third of its life
// left, and that the webhook configuration trusts that CA. It changes
// nothing that is already right, so it can run again and again (a Job at
// install, a CronJob after). A CA in its last year is replaced; the old
// one stays in the bundle until it expires, so that the API server trusts
// the serving certificate a replica still holds.
func EnsureCerts(ctx context.Context, client kubernetes.Interface, o CertOptions) (CertResult, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	logger := klog.FromContext(ctx)
	now := o.Clock.Now()
	var res CertResult
	secrets := client.CoreV1().Secrets(o.Namespace)
	secret, err := secrets.Get(ctx, o.SecretName, metav1.GetOptions{})
	exists := err == nil
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: o.SecretName, Namespace: o.Namespace,
				Labels: map[string]string{"app.kubernetes.io/name": o.ServiceName}},
			Type: corev1.SecretTypeTLS,
		}
	case err != nil:
		return res, fmt.Errorf("get Secret %s/%s: %w", o.Namespace, o.SecretName, err)
	}
	state := readState(secret.Data, now)
	hosts := o.hosts()
	if state.caKey == nil || state.ca.NotAfter.Sub(now) < caRenewal {
		if err := state.newCA(o.ServiceName, now); err != nil {
			return res, err
		}
		res.IssuedCA = true
	}
	if state.cert == nil || !valid(state.cert, state.ca, hosts, now) {
		if err := state.newServingCert(hosts, now); err != nil {
			return res, err
		}
		res.IssuedCert = true
	}
	res.NotAfter = state.cert.NotAfter
	data := state.encode(now)
	if !maps.EqualFunc(secret.Data, data, bytes.Equal) {
		secret.Data = data
		if !exists {
			_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
		} else {
			_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
		}
		if err != nil {
			return res, fmt.Errorf("write Secret %s/%s: %w", o.Namespace, o.SecretName, err)
		}
		logger.Info("Wrote the webhook serving certificate", "secret", klog.KRef(o.Namespace, o.SecretName),
			"newCA", res.IssuedCA, "newCertificate", res.IssuedCert, "notAfter", res.NotAfter)
	}
	res.CABundleUpdated, err = setCABundle(ctx, client, o, data[CAKey])
	if err != nil {
		return res, err
	}
	if res.CABundleUpdated {
		logger.Info("Set the webhook's caBundle", "webhook", o.WebhookName)
	}
	return res, nil
}

// hosts are the certificate's names: the Service's DNS names, then ExtraHosts.
func (o CertOptions) hosts() []string {
	return append([]string{
		o.ServiceName + "." + o.Namespace + ".svc",
		o.ServiceName + "." + o.Namespace + ".svc.cluster.local",
	}, o.ExtraHosts...)
}

// certState is what the Secret holds, parsed; a part that does not parse,
// or does not belong with the rest, is left nil and issued anew.
type certState struct {
	ca       *x509.Certificate
	caKey    crypto.Signer
	bundle   []*x509.Certificate // CAs trusted, newest first; includes ca
	cert     *x509.Certificate
	certPEM  []byte
	keyPEM   []byte
	caKeyPEM []byte
}

// caKeyKey holds the CA's private key in the Secret, so that the next run
// can sign with it.
const caKeyKey = "ca.key"

func readState(data map[string][]byte, now time.Time) certState {
	var s certState
	if certs, err := certutil.ParseCertsPEM(data[CAKey]); err == nil {
		for _, c := range certs {
			if c.IsCA && now.Before(c.NotAfter) {
				s.bundle = append(s.bundle, c)
			}
		}
	}
	if key, err := keyutil.ParsePrivateKeyPEM(data[caKeyKey]); err == nil && len(s.bundle) > 0 {
		if signer, ok := key.(crypto.Signer); ok && publicKeysEqual(signer.Public(), s.bundle[0].PublicKey) {
			s.ca, s.caKey, s.caKeyPEM = s.bundle[0], signer, data[caKeyKey]
		}
	}
	if s.ca == nil {
		return s
	}
	if pair, err := certutil.ParseCertsPEM(data[CertKey]); err == nil && len(pair) > 0 {
		if key, err := keyutil.ParsePrivateKeyPEM(data[KeyKey]); err == nil {
			if signer, ok := key.(crypto.Signer); ok && publicKeysEqual(signer.Public(), pair[0].PublicKey) {
				s.cert, s.certPEM, s.keyPEM = pair[0], data[CertKey], data[KeyKey]
			}
		}
	}
	return s
}

// valid: signed by ca, names every host, and a third of its life left.
func valid(cert, ca *x509.Certificate, hosts []string, now time.Time) bool {
	if cert.CheckSignatureFrom(ca) != nil {
		return false
	}
	life := cert.NotAfter.Sub(cert.NotBefore)
	if cert.NotAfter.Sub(now) < life/3 || now.Before(cert.NotBefore) {
		return false
	}
	for _, h := range hosts {
		if cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// encode is the Secret's data: the CAs not yet expired, the CA's key, and
// the serving pair.
func (s *certState) encode(now time.Time) map[string][]byte {
	var bundle bytes.Buffer
	for _, c := range s.bundle {
		if now.Before(c.NotAfter) {
			bundle.Write(pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: c.Raw}))
		}
	}
	return map[string][]byte{CAKey: bundle.Bytes(), caKeyKey: s.caKeyPEM, CertKey: s.certPEM, KeyKey: s.keyPEM}
}

// newKeyPEM is a P-256 key and its PEM form.
func newKeyPEM() (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate a key: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode a key: %w", err)
	}
	return key, keyPEM, nil
}

func (s *certState) newCA(name string, now time.Time) error {
	key, keyPEM, err := newKeyPEM()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", name, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	ca, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	s.bundle = append([]*x509.Certificate{ca}, s.bundle...)
	s.ca, s.caKey, s.caKeyPEM, s.cert = ca, key, keyPEM, nil
	return nil
}

func (s *certState) newServingCert(hosts []string, now time.Time) error {
	key, keyPEM, err := newKeyPEM()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(certLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	cert, err := sign(tmpl, s.ca, key.Public(), s.caKey)
	if err != nil {
		return err
	}
	s.cert, s.certPEM, s.keyPEM = cert, pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: cert.Raw}), keyPEM
	return nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", tmpl.Subject.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

var errNoWebhook = errors.New("no webhook of the configuration calls the Service")

// setCABundle writes bundle into every webhook of o.WebhookName that calls
// the Service; it reports whether it changed the configuration.
func setCABundle(ctx context.Context, client kubernetes.Interface, o CertOptions, bundle []byte) (bool, error) {
	webhooks := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg, err := webhooks.Get(ctx, o.WebhookName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", o.WebhookName, err)
	}
	changed, found := false, false
	for i := range cfg.Webhooks {
		svc := cfg.Webhooks[i].ClientConfig.Service
		if svc == nil || svc.Namespace != o.Namespace || svc.Name != o.ServiceName {
			continue
		}
		found = true
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, bundle) {
			cfg.Webhooks[i].ClientConfig.CABundle = slices.Clone(bundle)
			changed = true
		}
	}
	if !found {
		return false, fmt.Errorf("ValidatingWebhookConfiguration %s: %w %s/%s", o.WebhookName, errNoWebhook, o.Namespace, o.ServiceName)
	}
	if !changed {
		return false, nil
	}
	if _, err := webhooks.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("update ValidatingWebhookConfiguration %s: %w", o.WebhookName, err)
	}
	return true, nil
}
