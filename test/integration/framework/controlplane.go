package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
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
}

// StartControlPlane starts etcd and kube-apiserver for one test and installs
// Rota's CRDs. Everything stops when the test ends; components started on top
// of it must register their own cleanup later, so that they stop first.
func StartControlPlane(tb testing.TB) *ControlPlane {
	tb.Helper()
	storage := storagebackend.NewDefaultConfig("/"+strings.ToLower(sanitize(tb.Name())), nil)
	storage.Transport.ServerList = []string{startEtcd(tb)}

	flags := []string{
		// No controller-manager runs here: nothing would create the default
		// ServiceAccount or remove the not-ready taint from new nodes.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	}
	server, err := apiservertesting.StartTestServer(tb, apiservertesting.NewDefaultTestServerOptions(), flags, storage)
	if err != nil {
		tb.Fatalf("start kube-apiserver: %v", err)
	}
	tb.Cleanup(server.TearDownFn)

	cfg := rest.CopyConfig(server.ClientConfig)
	cfg.QPS, cfg.Burst = 500, 1000
	cp := &ControlPlane{
		Config:     cfg,
		Client:     kubernetes.NewForConfigOrDie(cfg),
		Dynamic:    dynamic.NewForConfigOrDie(cfg),
		Extensions: apiextensionsclient.NewForConfigOrDie(cfg),
		Kubeconfig: writeKubeconfig(tb, cfg),
	}
	cp.InstallCRDs(tb)
	return cp
}

// writeKubeconfig saves cfg as a kubeconfig file in the test's temp dir.
func writeKubeconfig(tb testing.TB, cfg *rest.Config) string {
	tb.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
		// The loopback certificate is issued for this name, not for 127.0.0.1.
		TLSServerName: cfg.ServerName,
	}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		tb.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// sanitize turns a test name into an etcd key prefix component.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
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
