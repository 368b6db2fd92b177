package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// ControlPlane is a running etcd + kube-apiserver with clients for it.
type ControlPlane struct {
	Config     *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	Extensions apiextensionsclient.Interface
	// Kubeconfig is the path of a kubeconfig file for out-of-process
	// clients such as kubectl or the built scheduler binary.
	Kubeconfig string

	stopOnce sync.Once
	stop     []func()
}

// Start runs etcd and kube-apiserver with their data under dir and writes
// dir/kubeconfig. Stop ends both; components started on top must be stopped
// before.
func Start(ctx context.Context, logger klog.Logger, dir string) (*ControlPlane, error) {
	return StartWithAPIServerFlags(ctx, logger, dir)
}

// StartWithAPIServerFlags is Start with more kube-apiserver flags. A
// --disable-admission-plugins among them replaces the default one (which
// turns off ServiceAccount and TaintNodesByCondition: no controller-manager
// runs here to serve them).
func StartWithAPIServerFlags(ctx context.Context, logger klog.Logger, dir string, apiserverFlags ...string) (_ *ControlPlane, err error) {
	r := newRunner(ctx, logger, dir)
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(fatal)
			if !ok {
				panic(p)
			}
			r.runCleanups()
			err = errors.New(f.msg)
		}
	}()
	cp, err := startWith(r, dir, true, apiserverFlags...)
	if err != nil {
		r.runCleanups()
		return nil, err
	}
	cp.stop = append(cp.stop, r.runCleanups)
	return cp, nil
}

// StartWith is Start for a test: kube-apiserver reports to t (its log, its
// failure on shutdown) and registers its own cleanups with it; Stop must
// still be called, before t's cleanups run.
func StartWith(t ktesting.TB, dir string) (*ControlPlane, error) {
	return startWith(t, dir, false)
}

func startWith(t ktesting.TB, dir string, quietEtcd bool, apiserverFlags ...string) (*ControlPlane, error) {
	if err := prepareCertFixtures(dir); err != nil {
		return nil, err
	}
	cp := &ControlPlane{}
	etcdURL, stopEtcd, err := startEtcd(filepath.Join(dir, "etcd"), quietEtcd)
	if err != nil {
		return nil, err
	}
	cp.stop = append(cp.stop, stopEtcd)

	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := []string{
		// As on most clusters: the DRA driver's DaemonSet is privileged.
		"--allow-privileged=true",
	}
	if !slices.ContainsFunc(apiserverFlags, func(f string) bool { return strings.HasPrefix(f, "--disable-admission-plugins=") }) {
		// No controller-manager runs here: nothing would create the default
		// ServiceAccount or remove the not-ready taint from new nodes.
		flags = append(flags, "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
	}
	flags = append(flags, apiserverFlags...)
	opts := apiservertesting.NewDefaultTestServerOptions()
	// checkInvariants makes the test server's own teardown check instead,
	// retrying a scrape that timed out on a loaded machine.
	opts.DisableInvariantChecks = true
	server, err := apiservertesting.StartTestServer(t, opts, flags, storage)
	if err != nil {
		cp.Stop()
		return nil, fmt.Errorf("start kube-apiserver with extra flags %v: %w", apiserverFlags, err)
	}
	serverConfig := rest.CopyConfig(server.ClientConfig)
	// Stop runs these last to first: the check, then the teardown.
	cp.stop = append(cp.stop, server.TearDownFn, func() { checkInvariants(t, serverConfig) })

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

// Stop ends kube-apiserver, then etcd. Safe to call more than once.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		for i := len(cp.stop) - 1; i >= 0; i-- {
			cp.stop[i]()
		}
	})
}

// prepareCertFixtures makes kube-apiserver's test server start in a binary
// built with -trimpath. The server looks for pre-generated serving
// certificates in a "testdata" directory next to its own source file, which
// it locates through the TEST_SRCDIR and TEST_WORKSPACE variables when the
// source path is relative; the certificates are generated there on first
// use. Under dir, such a directory is created and the variables point at it.
func prepareCertFixtures(dir string) error {
	src, ok := testServerSource()
	if !ok || filepath.IsAbs(src) {
		return nil
	}
	root := filepath.Join(dir, "apiserver-certs")
	if err := os.MkdirAll(filepath.Join(root, "ws", filepath.Dir(src), "testdata"), 0o700); err != nil {
		return fmt.Errorf("directory for kube-apiserver certificates: %w", err)
	}
	if err := os.Setenv("TEST_SRCDIR", root); err != nil {
		return err
	}
	return os.Setenv("TEST_WORKSPACE", "ws")
}
