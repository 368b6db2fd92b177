package controlplane

import (
	"fmt"
	"path/filepath"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// StartWithFlags is StartWith with extra kube-apiserver flags, such as
// "--authorization-mode=RBAC". They come after the flags every control plane
// sets, so a repeated flag overrides. The clients in the returned
// ControlPlane stay the apiserver's loopback identity (group system:masters),
// whatever the authorization mode.
func StartWithFlags(t ktesting.TB, dir string, apiserverFlags ...string) (*ControlPlane, error) {
	if err := prepareCertFixtures(dir); err != nil {
		return nil, err
	}
	cp := &ControlPlane{}
	etcdURL, stopEtcd, err := startEtcd(filepath.Join(dir, "etcd"), false)
	if err != nil {
		return nil, err
	}
	cp.stop = append(cp.stop, stopEtcd)

	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := append([]string{
		// As in StartWith: no controller-manager runs, and the DRA driver's
		// DaemonSet is privileged.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--allow-privileged=true",
	}, apiserverFlags...)
	server, err := apiservertesting.StartTestServer(t, apiservertesting.NewDefaultTestServerOptions(), flags, storage)
	if err != nil {
		cp.Stop()
		return nil, fmt.Errorf("start kube-apiserver with %v: %w", apiserverFlags, err)
	}
	cp.stop = append(cp.stop, server.TearDownFn)

	cfg := rest.CopyConfig(server.ClientConfig)
	cfg.QPS, cfg.Burst = 500, 1000
	cp.Config = cfg
	if cp.Client, err = kubernetes.NewForConfig(cfg); err == nil {
		if cp.Dynamic, err = dynamic.NewForConfig(cfg); err == nil {
			cp.Extensions, err = apiextensionsclient.NewForConfig(cfg)
		}
	}
	if err != nil {
		cp.Stop()
		return nil, fmt.Errorf("clients for kube-apiserver: %w", err)
	}
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(cfg, cp.Kubeconfig); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}
