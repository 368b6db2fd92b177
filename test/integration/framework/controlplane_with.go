package framework

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/rota-dev/rota/pkg/sandbox/controlplane"
)

// ControlPlaneOptions change how StartControlPlaneWith starts kube-apiserver.
type ControlPlaneOptions struct {
	// APIServerFlags are added after the flags every control plane sets,
	// e.g. "--authorization-mode=RBAC" to have RBAC decide every request
	// (the default test server allows everything).
	APIServerFlags []string
	// WithoutCRDs leaves Rota's CRDs out, as in a cluster Rota is not
	// installed in yet.
	WithoutCRDs bool
}

// StartControlPlaneWith is StartControlPlane with options. The clients in the
// returned ControlPlane keep the apiserver's loopback identity (group
// system:masters); use ImpersonateServiceAccount for a restricted one.
func StartControlPlaneWith(tb testing.TB, opts ControlPlaneOptions) *ControlPlane {
	tb.Helper()
	inner, err := controlplane.StartWithFlags(tb, tb.TempDir(), opts.APIServerFlags...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(inner.Stop)
	cp := &ControlPlane{
		Config:     inner.Config,
		Client:     inner.Client,
		Dynamic:    inner.Dynamic,
		Extensions: inner.Extensions,
		Kubeconfig: inner.Kubeconfig,
		cp:         inner,
	}
	if !opts.WithoutCRDs {
		cp.InstallCRDs(tb)
	}
	return cp
}

// ImpersonateServiceAccount returns a copy of the admin configuration that
// acts as the ServiceAccount namespace/name with the groups Kubernetes gives
// every ServiceAccount token, so that a component run in-process is
// authorized exactly as it would be in a pod.
func (cp *ControlPlane) ImpersonateServiceAccount(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}
