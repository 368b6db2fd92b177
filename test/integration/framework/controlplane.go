package framework

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rota-dev/rota/pkg/sandbox/controlplane"
)

// ControlPlane is a running etcd + kube-apiserver with clients for it.
type ControlPlane struct {
	Config     *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	Extensions apiextensionsclient.Interface
	// Kubeconfig is the path of a kubeconfig file for out-of-process clients,
	// such as the built scheduler binary.
	Kubeconfig string

	cp *controlplane.ControlPlane
}

// StartControlPlane starts etcd and kube-apiserver for one test and installs
// Rota's CRDs. Everything stops when the test ends; components started on top
// of it must register their own cleanup later, so that they stop first.
// The start-up itself lives in pkg/sandbox/controlplane, shared with
// rota-sandbox.
func StartControlPlane(tb testing.TB) *ControlPlane {
	tb.Helper()
	return StartControlPlaneWith(tb, ControlPlaneOptions{})
}

// RepoRoot is the directory holding go.mod, found from the test's working
// directory, so tests can load the manifests that are shipped.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found above the test's working directory")
		}
		dir = parent
	}
}
