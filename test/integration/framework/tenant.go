package framework

import (
	"context"
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
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
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	agg := clusterroleaggregation.NewClusterRoleAggregation(factory.Rbac().V1().ClusterRoles(), cp.Client.RbacV1())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		agg.Run(ctx, 1)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return cp
}

// TenantAdmin binds ClusterRole admin to user in namespace (which must
// exist), waits until the authorizer applies the binding, and returns the
// tenant's clients.
func (cp *ControlPlane) TenantAdmin(tb testing.TB, namespace, user string) *Tenant {
	tb.Helper()
	ctx := context.Background()
	_, err := cp.Client.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tenant-admin-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("bind admin to %s in %s: %v", user, namespace, err)
	}
	WaitFor(tb, fmt.Sprintf("%s to be admin of %s", user, namespace), func(ctx context.Context) (bool, string, error) {
		sar, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: namespace},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return sar.Status.Allowed, sar.Status.Reason, nil
	})
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return &Tenant{User: user, Namespace: namespace, Client: client, Dynamic: dyn}
}
