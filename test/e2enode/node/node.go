package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Config says where the node keeps its state and how it reaches the
// control plane.
type Config struct {
	// Dir holds everything the node writes; Stop leaves it unmounted.
	Dir string
	// Tools holds containerd, containerd-shim-runc-v2, ctr, runc, kubelet
	// and cni/ (bridge, host-local): make e2e-node's bin/tools.
	Tools string
	// Name is the Node object's name.
	Name string
	// Labels are the node's labels (--node-labels).
	Labels map[string]string
	// Kubeconfig is the kubelet's credentials for kube-apiserver.
	Kubeconfig string
	// APIServer is kube-apiserver's host:port on this machine.
	APIServer string
	// ServiceIP is the kubernetes Service's ClusterIP: pods reach
	// kube-apiserver there (port 443), as through kube-proxy.
	ServiceIP net.IP
	// PodCIDR is the pods' network on the bridge.
	PodCIDR string
	// KubeletPort is the kubelet's API port on 127.0.0.1.
	KubeletPort int
	// GPUs is how many fake device nodes (/dev/nvidia<N>) the driver root
	// holds.
	GPUs int
	// KubeletVerbosity is the kubelet's --v.
	KubeletVerbosity int
}

// Node is a running node.
type Node struct {
	cfg         Config
	containerd  *process
	kubelet     *process
	proxy       *serviceProxy
	netnsBefore map[string]bool
	// hostBefore are the hostPaths that existed before Start.
	hostBefore map[string]bool
}

// Start brings the node up: fake GPU device nodes, the pod network,
// containerd, the kubelet. On error everything started is stopped again.
func Start(ctx context.Context, cfg Config) (_ *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root (mounts, cgroups, network devices)")
	}
	n := &Node{cfg: cfg, netnsBefore: netnsNames(), hostBefore: existing(hostPaths())}
	defer func() {
		if err != nil {
			if stopErr := n.Stop(ctx); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	if err := os.MkdirAll(n.logDir(), 0o755); err != nil {
		return nil, err
	}
	if err := n.makeDeviceNodes(); err != nil {
		return nil, err
	}
	if err := n.writeCNIConfig(); err != nil {
		return nil, err
	}
	if n.proxy, err = startServiceProxy(ctx, cfg.ServiceIP, 443, cfg.APIServer); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// StartKubelet starts the kubelet, once the images the pods need are
// imported (ImportImage).
func (n *Node) StartKubelet(ctx context.Context) error { return n.startKubelet(ctx) }

func (n *Node) logDir() string { return filepath.Join(n.cfg.Dir, "logs") }

// LogDir holds containerd's and the kubelet's logs.
func (n *Node) LogDir() string { return n.logDir() }

// CDIDir is the container runtime's CDI spec directory.
func (n *Node) CDIDir() string { return filepath.Join(n.cfg.Dir, "cdi") }

// DriverRoot holds the fake GPUs' device nodes under dev/.
func (n *Node) DriverRoot() string { return filepath.Join(n.cfg.Dir, "driver-root") }

// nvidiaMajor is the character device major number of NVIDIA's GPUs.
const nvidiaMajor = 195

// makeDeviceNodes creates the device nodes an NVIDIA driver would:
// /dev/nvidia<N> and /dev/nvidiactl (major 195) and the UVM nodes, under
// the driver root. Nothing backs them (opening one fails with ENXIO); the
// runtime only needs them to exist to give them to a container.
func (n *Node) makeDeviceNodes() error {
	dev := filepath.Join(n.DriverRoot(), "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	nodes := map[string][2]uint32{"nvidiactl": {nvidiaMajor, 255}, "nvidia-uvm": {510, 0}, "nvidia-uvm-tools": {510, 1}}
	for i := range n.cfg.GPUs {
		nodes[fmt.Sprintf("nvidia%d", i)] = [2]uint32{nvidiaMajor, uint32(i)}
	}
	for name, mm := range nodes {
		path := filepath.Join(dev, name)
		if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(mm[0], mm[1]))); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("mknod %s: %w", path, err)
		}
	}
	return nil
}

// Stop tears the node down: the kubelet, every container, containerd and
// its shims, then whatever is still mounted under Dir, the pods' network
// namespaces, the bridge and the service address. It returns what it
// could not undo.
func (n *Node) Stop(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var errs []error
	if err := n.StopKubelet(); err != nil {
		errs = append(errs, err)
	}
	if n.containerd != nil && !n.containerd.exited() {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := n.killContainers(cctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
		if err := n.containerd.stop(20 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := killShims(n.containerdSocket()); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(n.cfg.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeNewNetns(n.netnsBefore); err != nil {
		errs = append(errs, err)
	}
	if err := removeNewHostPaths(n.hostBefore); err != nil {
		errs = append(errs, err)
	}
	if err := removeBridge(); err != nil {
		errs = append(errs, err)
	}
	if n.proxy != nil {
		if err := n.proxy.stop(); err != nil {
			errs = append(errs, err)
		}
		n.proxy = nil
	}
	if err := errors.Join(errs...); err != nil {
		logger.Error(err, "Node teardown left something behind")
		return err
	}
	return nil
}
