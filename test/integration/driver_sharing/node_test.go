package driversharing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/rota-dev/rota/pkg/driver/app"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
	"github.com/rota-dev/rota/test/integration/framework"
)

// gpuNode is one node running the real plugin in-process, with the test as
// its kubelet over the plugin's unix socket.
type gpuNode struct {
	t      testing.TB
	cp     *framework.ControlPlane
	name   string
	opts   app.Options
	setter *timeslice.Recorder
	plugin *app.Plugin
	conn   *grpc.ClientConn
	dra    drapb.DRAPluginClient
}

// startGPUNode creates the Node and starts the plugin on mock NVML with
// --consumable-memory.
func startGPUNode(t testing.TB, cp *framework.ControlPlane, name, profile string) *gpuNode {
	t.Helper()
	// Unix socket paths are limited to 108 bytes: t.TempDir() is too long.
	dir, err := os.MkdirTemp("/tmp", "rota-share")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("boot-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cp.Create(t, framework.Node(name))
	opts := app.DefaultOptions()
	opts.NodeName = name
	opts.MockProfile = profile
	opts.ConsumableMemory = true
	opts.CDIRoot = filepath.Join(dir, "cdi")
	opts.PluginDataDir = filepath.Join(dir, "p")
	opts.RegistrarDir = filepath.Join(dir, "r")
	opts.CheckpointDir = opts.PluginDataDir
	opts.BootIDFile = bootID
	opts.HTTPAddress = ""
	opts.ProbeInterval = 100 * time.Millisecond
	n := &gpuNode{t: t, cp: cp, name: name, opts: opts, setter: &timeslice.Recorder{}}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *gpuNode) start() {
	n.t.Helper()
	logger := ktesting.NewLogger(n.t, ktesting.NewConfig(ktesting.Verbosity(2)))
	p, err := app.Start(klog.NewContext(context.Background(), logger), n.opts, app.Extra{
		KubeClient: n.cp.Client, TimeSlicer: n.setter,
		Fatal: func(err error) { n.t.Errorf("plugin fatal error: %v", err) },
	})
	if err != nil {
		n.t.Fatalf("starting plugin: %v", err)
	}
	n.plugin = p
	n.conn, err = grpc.NewClient("unix://"+filepath.Join(n.opts.PluginDataDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatalf("dial plugin: %v", err)
	}
	n.dra = drapb.NewDRAPluginClient(n.conn)
}

// stop ends the plugin; the checkpoint stays for the next start.
func (n *gpuNode) stop() {
	if n.conn != nil {
		_ = n.conn.Close()
		n.conn = nil
	}
	if n.plugin != nil {
		n.plugin.Stop()
		n.plugin = nil
	}
}

func (n *gpuNode) restart() {
	n.stop()
	n.start()
}

// prepare calls NodePrepareResources for one claim, as the kubelet does.
func (n *gpuNode) prepare(ctx context.Context, c *resourceapi.ResourceClaim) (*drapb.NodePrepareResourceResponse, error) {
	resp, err := n.dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}},
	})
	if err != nil {
		return nil, err
	}
	r := resp.Claims[string(c.UID)]
	if r == nil {
		return nil, fmt.Errorf("no result for claim %s", c.UID)
	}
	if r.Error != "" {
		return r, fmt.Errorf("%s", r.Error)
	}
	return r, nil
}

func (n *gpuNode) unprepare(ctx context.Context, c *resourceapi.ResourceClaim) error {
	resp, err := n.dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}},
	})
	if err != nil {
		return err
	}
	if r := resp.Claims[string(c.UID)]; r == nil || r.Error != "" {
		return fmt.Errorf("unprepare claim %s: %v", c.UID, r)
	}
	return nil
}

// checkpointClaims reads the checkpoint file as a restarted plugin would.
func (n *gpuNode) checkpointClaims() map[string]checkpoint.Claim {
	n.t.Helper()
	store, err := checkpoint.NewStore(n.opts.CheckpointDir)
	if err != nil {
		n.t.Fatal(err)
	}
	cp, err := store.Load("boot-1")
	if err != nil {
		n.t.Fatal(err)
	}
	return cp.Claims
}

// slice returns the node's published ResourceSlice once there is one.
func (n *gpuNode) slice() *resourceapi.ResourceSlice {
	n.t.Helper()
	var found *resourceapi.ResourceSlice
	framework.WaitFor(n.t, "the node's ResourceSlice", func(ctx context.Context) (bool, string, error) {
		list, err := n.cp.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for i := range list.Items {
			if s := &list.Items[i]; s.Spec.Driver == framework.DriverName && s.Spec.Pool.Name == n.name {
				found = s
			}
		}
		return found != nil, "no slice yet", nil
	})
	return found
}
