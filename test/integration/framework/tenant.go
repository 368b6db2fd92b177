package framework

import (
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Tenant is a namespace admin with no cluster rights, as a platform team
// hands a namespace to a team: the built-in ClusterRole admin bound in one
// namespace. Its clients impersonate the user, so every request passes the
// apiserver's RBAC and admission (policies included) as that user.
type Tenant struct {
	User      string
	Namespace string
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
}

// StartControlPlaneWithRBAC starts a control plane that authorizes every
// request with RBAC (the test server allows everything otherwise), with
// kube-controller-manager's ClusterRole aggregation controller, which fills
// the built-in admin, edit and view roles from their aggregated parts; the
// control plane's own clients keep system:masters.
func StartControlPlaneWithRBAC(tb testing.TB) *ControlPlane {
	tb.Helper()
	cp := StartControlPlaneWith(tb, ControlPlaneOptions{APIServerFlags: []string{"--authorization-mode=RBAC"}})
	cp.StartRoleAggregation(tb)
	return cp
}

// TenantAdmin binds ClusterRole admin to user in namespace (which must
// exist), waits until the authorizer applies the binding, and returns the
// tenant's clients.
func (cp *ControlPlane) TenantAdmin(tb testing.TB, namespace, user string) *Tenant {
	tb.Helper()
	client := cp.NamespaceAdmin(tb, user, namespace)
	dyn, err := dynamic.NewForConfig(cp.ImpersonateUser(user))
	if err != nil {
		tb.Fatal(err)
	}
	return &Tenant{User: user, Namespace: namespace, Client: client, Dynamic: dyn}
}
