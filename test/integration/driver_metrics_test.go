package integration

import (
	"context"
	"crypto/tls"
	"fmt"
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

// TestDriverMetricsSecure: with --metrics-secure the plugin serves
// /metrics over TLS as kube components do: an anonymous request gets 401,
// a ServiceAccount the API server authenticates but RBAC does not allow
// gets 403, and one bound to a role with get on /metrics gets the metrics.
// The API server authorizes with RBAC.
func TestDriverMetricsSecure(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlaneWith(t, framework.ControlPlaneOptions{APIServerFlags: []string{"--authorization-mode=RBAC"}})
	cp.Create(t, framework.DeviceClass(), framework.Namespace("monitoring"))
	n := startGPUNode(t, cp, "node-metrics", "l4x2", func(n *gpuNode) {
		n.opts.MetricsAddress, n.opts.MetricsSecure = "127.0.0.1:0", true
	})
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
	prometheus, stranger := token("prometheus"), token("stranger")
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

	// The serving certificate is self-signed; a scraper trusts the address.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test of a self-signed listener
	get := func(bearer string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.plugin.MetricsAddr+"/metrics", nil)
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
	for _, c := range []struct {
		who, token string
		want       int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"a token the API server does not know", "not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without get on /metrics", stranger, http.StatusForbidden},
	} {
		if code, body := get(c.token); code != c.want {
			t.Errorf("%s: %d %q, want %d", c.who, code, body, c.want)
		}
	}
	code, body := get(prometheus)
	if code != http.StatusOK || !strings.Contains(body, `rota_driver_devices{health="Healthy"} 2`) {
		t.Errorf("the prometheus ServiceAccount: %d, body %s", code, fmt.Sprintf("%.300q", body))
	}
	// Plain HTTP is not served on that port.
	if resp, err := http.Get("http://" + n.plugin.MetricsAddr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP /metrics answered 200")
		}
	}
}
