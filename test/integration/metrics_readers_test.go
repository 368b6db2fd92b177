package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/test/integration/framework"
)

// metricsReaders makes two ServiceAccounts in namespace monitoring (which
// must exist) and returns their tokens: prometheus, bound to a ClusterRole
// with get on /metrics, and stranger, bound to nothing.
func metricsReaders(t *testing.T, cp *framework.ControlPlane) (prometheus, stranger string) {
	t.Helper()
	ctx := context.Background()
	token := func(sa string) string {
		t.Helper()
		if _, err := cp.Client.CoreV1().ServiceAccounts("monitoring").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cp.Client.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	prometheus, stranger = token("prometheus"), token("stranger")
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "rota-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rota-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rota-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "RBAC to allow the prometheus ServiceAccount /metrics", func(ctx context.Context) (bool, string, error) {
		sar, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:monitoring:prometheus", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return sar.Status.Allowed, sar.Status.Reason, nil
	})
	return prometheus, stranger
}

// getSecureMetrics GETs https://addr/metrics with bearer (none when empty)
// and returns the status code and body. The serving certificate is
// self-signed; a scraper trusts the address.
func getSecureMetrics(t *testing.T, addr, bearer string) (int, string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test of a self-signed listener
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
