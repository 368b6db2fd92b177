// Package secureserving serves a Rota component's /metrics to the callers
// the API server authenticates and authorizes, as Kubernetes' own
// components do (--metrics-secure of the DRA driver and the schedule
// controller).
package secureserving

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	certutil "k8s.io/client-go/util/cert"
)

// Metrics wraps h, the /metrics handler of a Rota component, the way
// kube-scheduler and the kubelet serve theirs: over TLS, to callers whose
// bearer token the API server accepts (TokenReview) and who may get the
// non-resource URL /metrics (SubjectAccessReview). Anonymous requests get
// 401, callers without the right 403. The serving certificate is
// self-signed for name, made at start-up: scrapers authenticate the
// component by where they reach it, as they do for the kubelet's. The
// component's ServiceAccount needs the rights of system:auth-delegator.
//
// It returns the handler to serve and the TLS configuration of its
// listener.
func Metrics(h http.Handler, client kubernetes.Interface, name string) (http.Handler, *tls.Config, error) {
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      options.DefaultAuthWebhookRetryBackoff(),
		CacheTTL:                 2 * time.Minute,
	}.New()
	if err != nil {
		return nil, nil, fmt.Errorf("metrics authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       options.DefaultAuthWebhookRetryBackoff(),
	}.New()
	if err != nil {
		return nil, nil, fmt.Errorf("metrics authorization: %w", err)
	}
	h = genericapifilters.WithAuthorization(h, authz, scheme.Codecs)
	h = genericapifilters.WithAuthentication(h, authn, genericapifilters.Unauthorized(scheme.Codecs), nil, nil)
	h = genericapifilters.WithRequestInfo(h, &apirequest.RequestInfoFactory{})

	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(name, nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics serving certificate: %w", err)
	}
	return h, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
