package framework

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
)

// ApplyManifests creates every object of the shipped YAML files (relative
// to the repository root), creating the namespaces they name first, and
// fails the test on the first refusal.
func (cp *ControlPlane) ApplyManifests(tb testing.TB, files ...string) {
	tb.Helper()
	for _, m := range Manifests(tb, files...) {
		if ns := m.Object.GetNamespace(); ns != "" {
			cp.EnsureNamespace(tb, ns)
		}
		if _, err := cp.CreateManifest(tb, m.Object); err != nil {
			tb.Fatalf("%s: create %s %s: %v", m.File, m.Object.GetKind(), m.Object.GetName(), err)
		}
	}
}

// EnsureNamespace creates the namespace unless it exists.
func (cp *ControlPlane) EnsureNamespace(tb testing.TB, name string) {
	tb.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), Namespace(name), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create namespace %s: %v", name, err)
	}
}

// StartRoleAggregation runs kube-controller-manager's ClusterRole
// aggregation controller, which fills the aggregated bootstrap roles
// (admin, edit, view) from the roles labelled to aggregate into them. An
// apiserver started with RBAC creates those roles empty; without this
// controller a RoleBinding to "admin" grants nothing.
func (cp *ControlPlane) StartRoleAggregation(tb testing.TB) {
	tb.Helper()
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	ctrl := clusterroleaggregation.NewClusterRoleAggregation(factory.Rbac().V1().ClusterRoles(), cp.Client.RbacV1())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx, 1)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}

// ImpersonateUser returns a copy of the admin configuration that acts as
// the user, an ordinary authenticated person with no groups of note.
func (cp *ControlPlane) ImpersonateUser(user string) *rest.Config {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return cfg
}

// NamespaceAdmin binds the ClusterRole admin to user in namespace, the way
// a platform team hands a tenant its namespace, waits until the
// authorizer grants it (StartRoleAggregation must run), and returns a
// client that acts as the user.
func (cp *ControlPlane) NamespaceAdmin(tb testing.TB, user, namespace string) kubernetes.Interface {
	tb.Helper()
	ctx := context.Background()
	cp.EnsureNamespace(tb, namespace)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := cp.Client.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("bind admin to %s in %s: %v", user, namespace, err)
	}
	client, err := kubernetes.NewForConfig(cp.ImpersonateUser(user))
	if err != nil {
		tb.Fatal(err)
	}
	WaitFor(tb, "user "+user+" to be admin of namespace "+namespace, func(ctx context.Context) (bool, string, error) {
		_, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		_, err = client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	return client
}
