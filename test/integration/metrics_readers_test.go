package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
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

// checkSecureMetrics checks a --metrics-secure listener at addr: anonymous
// callers and unknown tokens get 401, stranger 403, none of them sees
// hidden; prometheus reads a body containing want; plain HTTP is not
// answered with the metrics.
func checkSecureMetrics(t *testing.T, addr, prometheus, stranger, want, hidden string) {
	t.Helper()
	for _, c := range []struct {
		who, token string
		want       int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"a token the API server does not know", "not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without get on /metrics", stranger, http.StatusForbidden},
	} {
		if code, body := getSecureMetrics(t, addr, c.token); code != c.want || strings.Contains(body, hidden) {
			t.Errorf("%s: %d %.200q, want %d and nothing of %q", c.who, code, body, c.want, hidden)
		}
	}
	if code, body := getSecureMetrics(t, addr, prometheus); code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("the prometheus ServiceAccount: %d, body %.300q, want it to contain %q", code, body, want)
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP /metrics answered 200")
		}
	}
}
