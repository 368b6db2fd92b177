package e2enode

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/sandbox/controlplane"
	"github.com/rota-dev/rota/test/e2enode/node"
)

// cluster is the one node and control plane every test of the package
// shares, as tests on a real cluster do; TestMain starts and stops it.
var cluster *e2eCluster

type e2eCluster struct {
	cp         *controlplane.ControlPlane
	client     kubernetes.Interface
	node       *node.Node
	nodeName   string
	dir        string
	binDir     string
	kubeconfig string
	// images are Rota's image references, by the chart's value key.
	images map[string]name.Tag
}

const (
	nodeName = "e2e-gpu-node"
	// serviceCIDR's first address is the kubernetes Service's ClusterIP.
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
	podCIDR     = "10.88.0.0/16"
	// gpus is the dgx-h100 profile's count.
	gpus = 8
)

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("ROTA_E2E_NODE") != "1" {
		fmt.Println("skipped: the real-node tests run with ROTA_E2E_NODE=1, as root (make e2e-node)")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	binDir := os.Getenv("ROTA_BIN_DIR")
	if binDir == "" {
		fmt.Fprintln(os.Stderr, "ROTA_BIN_DIR (make e2e-node's bin/) is required")
		return 1
	}
	// Short: the driver's socket, <dir>/n/kubelet/plugins/gpu.rota.dev/
	// dra-<pod UID>.sock, must fit a unix socket address (107 bytes).
	dir, err := os.MkdirTemp("", "rota-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	keep := os.Getenv("ROTA_E2E_KEEP") == "1"
	defer func() {
		if keep || code != 0 {
			fmt.Fprintf(os.Stderr, "logs kept in %s\n", filepath.Join(dir, "n", "logs"))
			return
		}
		_ = os.RemoveAll(dir)
	}()
	c, stop, err := startCluster(ctx, dir, binDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bringing up the node: %v\n", err)
		if stop != nil {
			if err := stop(); err != nil {
				fmt.Fprintf(os.Stderr, "tearing down the node: %v\n", err)
			}
		}
		return 1
	}
	cluster = c
	code = m.Run()
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "tearing down the node: %v\n", err)
		code = 1
	}
	return code
}

// startCluster brings up the control plane, the controllers, the node and
// Rota. stop undoes whatever was started, and says what it could not undo.
func startCluster(ctx context.Context, dir, binDir string) (_ *e2eCluster, stop func() error, err error) {
	start := time.Now()
	logger := klog.FromContext(ctx)
	var stops []func() error
	stop = func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			if err := stops[i](); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%v", errs)
		}
		return nil
	}
	cp, err := controlplane.StartWithAPIServerFlags(ctx, logger, filepath.Join(dir, "controlplane"),
		// Pods get their ServiceAccount's token (the controllers below
		// create the default ServiceAccounts and kube-root-ca.crt).
		"--disable-admission-plugins=TaintNodesByCondition",
		"--service-cluster-ip-range="+serviceCIDR,
	)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() error { cp.Stop(); return nil })
	host, err := url.Parse(cp.Config.Host)
	if err != nil {
		return nil, stop, err
	}
	rootCA, err := servingCA(host.Host)
	if err != nil {
		return nil, stop, err
	}
	stopControllers, err := startControllers(ctx, cp.Client, cp.Kubeconfig, dir, rootCA)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() error { stopControllers(); return nil })

	tools := filepath.Join(binDir, "tools")
	n, err := node.Start(ctx, node.Config{
		Dir:   filepath.Join(dir, "n"),
		Tools: tools,
		Name:  nodeName,
		// The driver DaemonSet's nodeSelector (chart default).
		Labels:           map[string]string{"nvidia.com/gpu.present": "true"},
		Kubeconfig:       cp.Kubeconfig,
		APIServer:        host.Host,
		ServiceIP:        net.ParseIP(serviceIP),
		PodCIDR:          podCIDR,
		KubeletPort:      freePort(),
		GPUs:             gpus,
		KubeletVerbosity: 2,
	})
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() error { return n.Stop(ctx) })
	c := &e2eCluster{cp: cp, client: cp.Client, node: n, nodeName: nodeName, dir: dir, binDir: binDir, kubeconfig: cp.Kubeconfig}
	if err := c.importImages(ctx); err != nil {
		return nil, stop, err
	}
	if err := n.StartKubelet(ctx); err != nil {
		return nil, stop, err
	}
	if err := c.waitForNodeReady(ctx, 2*time.Minute); err != nil {
		return nil, stop, err
	}
	logger.Info("Node is ready", "node", nodeName, "after", time.Since(start).Round(time.Second))
	if err := c.installRota(ctx); err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() error { return c.uninstallRota(ctx) })
	logger.Info("Rota is installed and running", "after", time.Since(start).Round(time.Second))
	return c, stop, nil
}

// servingCA returns the CA certificate (PEM) that signed kube-apiserver's
// serving certificate: what kube-root-ca.crt gives pods to verify it.
func servingCA(hostPort string) ([]byte, error) {
	conn, err := tls.Dial("tcp", hostPort, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the chain, not trusting it
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's certificate: %w", err)
	}
	defer func() { _ = conn.Close() }()
	chain := conn.ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, fmt.Errorf("kube-apiserver at %s sent no certificate", hostPort)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: chain[len(chain)-1].Raw}), nil
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
