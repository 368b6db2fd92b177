package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/rota-dev/rota/pkg/driver/app"
	"github.com/rota-dev/rota/pkg/sim/kubelet"
)

// Node is one simulated GPU node: the real kubelet plugin on mock NVML and
// a simulated kubelet calling it.
type Node struct {
	Name, Profile string
	Plugin        *app.Plugin

	dir  string
	conn *grpc.ClientConn
	stop func()
}

// nodeObject is a Ready node with room for many pods.
func nodeObject(name string) *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourcePods:   resource.MustParse("110"),
		v1.ResourceCPU:    resource.MustParse("64"),
		v1.ResourceMemory: resource.MustParse("512Gi"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}

func (c *Cluster) startNode(ctx context.Context, spec NodeSpec) (_ *Node, err error) {
	logger := klog.FromContext(ctx).WithValues("node", spec.Name)
	ctx = klog.NewContext(ctx, logger)
	if err := c.createNode(ctx, spec.Name); err != nil {
		return nil, err
	}

	// Unix socket paths are limited to 108 bytes: keep the plugin's short.
	dir, err := os.MkdirTemp("/tmp", "rota-sb-")
	if err != nil {
		return nil, fmt.Errorf("plugin directory: %w", err)
	}
	n := &Node{Name: spec.Name, Profile: spec.Profile, dir: dir}
	defer func() {
		if err != nil {
			n.stopAll(nil)
		}
	}()
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("boot-1\n"), 0o600); err != nil {
		return nil, err
	}
	opts := pluginOptions(spec, dir, bootID)
	n.Plugin, err = app.Start(ctx, opts, app.Extra{
		KubeClient: c.Client,
		Fatal:      func(err error) { logger.Error(err, "Kubelet plugin failed") },
	})
	if err != nil {
		return nil, fmt.Errorf("starting kubelet plugin: %w", err)
	}
	n.conn, err = grpc.NewClient("unix://"+filepath.Join(opts.PluginDataDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dialing kubelet plugin: %w", err)
	}
	if err := c.startKubelet(ctx, n); err != nil {
		return nil, err
	}

	// The node counts once its GPUs are published.
	if err = c.waitForSlice(ctx, spec.Name); err != nil {
		n.stop()
		return nil, fmt.Errorf("the plugin did not publish the node's GPUs: %w", err)
	}
	return n, nil
}

// RegisterNode registers the Node object, Ready, as a kubelet would.
func (c *Cluster) RegisterNode(ctx context.Context, name string) error {
	return c.createNode(ctx, name)
}

// WaitForSlice waits until the node's plugin published its devices.
func (c *Cluster) WaitForSlice(ctx context.Context, nodeName string) error {
	return c.waitForSlice(ctx, nodeName)
}

// createNode registers the Node object, Ready, as a kubelet would.
func (c *Cluster) createNode(ctx context.Context, name string) error {
	node, err := c.Client.CoreV1().Nodes().Create(ctx, nodeObject(name), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating Node: %w", err)
	}
	node.Status = nodeObject(name).Status
	if _, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	return nil
}

// pluginOptions runs the real kubelet plugin on spec's mock profile with all
// its files under dir.
func pluginOptions(spec NodeSpec, dir, bootID string) app.Options {
	opts := app.DefaultOptions()
	opts.NodeName = spec.Name
	opts.MockProfile = spec.Profile
	opts.ConsumableMemory = spec.ConsumableMemory
	opts.CDIRoot = filepath.Join(dir, "cdi")
	opts.PluginDataDir = filepath.Join(dir, "p")
	opts.RegistrarDir = filepath.Join(dir, "r")
	opts.CheckpointDir = opts.PluginDataDir
	opts.BootIDFile = bootID
	opts.HTTPAddress, opts.MetricsAddress = "", ""
	// Health is probed in real time: a fault injected by a scenario shows
	// as a device taint within a fraction of a second.
	opts.ProbeInterval = 100 * time.Millisecond
	opts.XIDHoldTime = -1
	return opts
}

// startKubelet runs the simulated kubelet for n against its plugin's
// connection and sets n.stop to end both.
func (c *Cluster) startKubelet(ctx context.Context, n *Node) error {
	k, err := kubelet.New(kubelet.Options{
		Client: c.Client, NodeName: n.Name, Clock: c.opts.Clock,
		StartDelay: c.opts.Kubelet.StartDelay, ReadyDelay: c.opts.Kubelet.ReadyDelay,
		MaxGracePeriod: c.opts.Kubelet.MaxGracePeriod,
		Preparer:       drapb.NewDRAPluginClient(n.conn),
	})
	if err != nil {
		return err
	}
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := k.Run(kctx); err != nil {
			klog.FromContext(ctx).Error(err, "Simulated kubelet failed")
		}
	}()
	n.stop = func() {
		cancel()
		<-done
		n.stopAll(nil)
	}
	return nil
}

// waitForSlice waits until a ResourceSlice with devices is published for
// the node.
func (c *Cluster) waitForSlice(ctx context.Context, nodeName string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		slices, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, s := range slices.Items {
			if s.Spec.NodeName != nil && *s.Spec.NodeName == nodeName && len(s.Spec.Devices) > 0 {
				return true, nil
			}
		}
		return false, nil
	})
}

func (n *Node) stopAll(_ error) {
	if n.conn != nil {
		_ = n.conn.Close()
		n.conn = nil
	}
	if n.Plugin != nil {
		n.Plugin.Stop()
		n.Plugin = nil
	}
	if n.dir != "" {
		_ = os.RemoveAll(n.dir)
		n.dir = ""
	}
}

// InjectXID makes GPU index fail with the XID in the node's mock NVML; the
// plugin's health monitor taints the device.
func (n *Node) InjectXID(index int, xid uint64) error {
	if n.Plugin == nil || n.Plugin.Mock == nil {
		return fmt.Errorf("node %s has no mock NVML", n.Name)
	}
	return n.Plugin.Mock.InjectXID(index, xid)
}

// Recover clears the faults of GPU index.
func (n *Node) Recover(index int) error {
	if n.Plugin == nil || n.Plugin.Mock == nil {
		return fmt.Errorf("node %s has no mock NVML", n.Name)
	}
	n.Plugin.Mock.Recover(index)
	return nil
}
