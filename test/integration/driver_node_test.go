package integration

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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/app"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/state"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
	"github.com/rota-dev/rota/test/integration/framework"
)

// gpuNode is one simulated GPU node running the real gpu.rota.dev plugin
// in-process against the test's API server. The test plays the kubelet: it
// talks to the plugin over its real unix sockets.
type gpuNode struct {
	t      testing.TB
	cp     *framework.ControlPlane
	name   string
	opts   app.Options
	plugin *app.Plugin
	hook   func(state.Step) error
	// slicer replaces the plugin's time-slice setter when set.
	slicer timeslice.Setter
	// external: the plugin runs elsewhere (a binary); only connect to it.
	external bool
	// kubeClient replaces the test's shared client as the plugin's when set.
	kubeClient kubernetes.Interface
	dra        drapb.DRAPluginClient
	conns      []*grpc.ClientConn
}

// startGPUNode creates the Node object and starts the plugin with profile;
// mods adjust the options before the start.
func startGPUNode(t testing.TB, cp *framework.ControlPlane, name, profile string, mods ...func(*gpuNode)) *gpuNode {
	t.Helper()
	// Unix socket paths are limited to 108 bytes: t.TempDir() is too long.
	dir, err := os.MkdirTemp("/tmp", "rota")
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
	opts.MockFaultFile = filepath.Join(dir, "faults")
	opts.CDIRoot = filepath.Join(dir, "cdi")
	opts.PluginDataDir = filepath.Join(dir, "p")
	opts.RegistrarDir = filepath.Join(dir, "r")
	opts.CheckpointDir = filepath.Join(dir, "p")
	opts.BootIDFile = bootID
	opts.HTTPAddress, opts.MetricsAddress = "", ""
	opts.ProbeInterval = 100 * time.Millisecond
	opts.XIDHoldTime = -1 // recovery as soon as the probe passes
	opts.FaultPollEvery = 50 * time.Millisecond
	n := &gpuNode{t: t, cp: cp, name: name, opts: opts}
	for _, mod := range mods {
		mod(n)
	}
	if n.external {
		n.connect()
	} else {
		n.start()
	}
	t.Cleanup(n.stop)
	return n
}

func (n *gpuNode) start() {
	n.t.Helper()
	logger := ktesting.NewLogger(n.t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx := klog.NewContext(context.Background(), logger)
	client := n.kubeClient
	if client == nil {
		client = n.cp.Client
	}
	p, err := app.Start(ctx, n.opts, app.Extra{KubeClient: client, Hook: n.hook, TimeSlicer: n.slicer,
		Fatal: func(err error) { n.t.Errorf("plugin fatal error: %v", err) }})
	if err != nil {
		n.t.Fatalf("starting plugin: %v", err)
	}
	n.plugin = p
	n.connect()
}

// connect dials the plugin's service socket as the kubelet does.
func (n *gpuNode) connect() {
	n.dra = drapb.NewDRAPluginClient(n.dial(n.draSocket()))
}

// draSocket is the plugin's service socket: dra.sock, or dra-<pod UID>.sock
// with rolling updates.
func (n *gpuNode) draSocket() string {
	if n.opts.PodUID != "" {
		return filepath.Join(n.opts.PluginDataDir, "dra-"+n.opts.PodUID+".sock")
	}
	return filepath.Join(n.opts.PluginDataDir, "dra.sock")
}

// regSocket is the plugin's registration socket, where the kubelet finds it.
func (n *gpuNode) regSocket() string {
	if n.opts.PodUID != "" {
		return filepath.Join(n.opts.RegistrarDir,
			kubeletplugin.RollingUpdateRegistrarSocketFile(n.opts.RegistrarDir, gpuv1.DriverName, types.UID(n.opts.PodUID)))
	}
	return filepath.Join(n.opts.RegistrarDir, gpuv1.DriverName+"-reg.sock")
}

// stop ends the plugin as a kill would: nothing is cleaned up on the way.
func (n *gpuNode) stop() {
	for _, c := range n.conns {
		_ = c.Close()
	}
	n.conns = nil
	if n.plugin != nil {
		n.plugin.Stop()
		n.plugin = nil
	}
}

func (n *gpuNode) restart() {
	n.stop()
	n.start()
}

func (n *gpuNode) dial(path string) *grpc.ClientConn {
	n.t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatalf("dial %s: %v", path, err)
	}
	n.conns = append(n.conns, conn)
	return conn
}

func (n *gpuNode) getInfo(ctx context.Context) (*registerapi.PluginInfo, error) {
	reg := registerapi.NewRegistrationClient(n.dial(n.regSocket()))
	return reg.GetInfo(ctx, &registerapi.InfoRequest{})
}

// prepare calls NodePrepareResources for one claim as the kubelet does.
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

func (n *gpuNode) cdiPath(c *resourceapi.ResourceClaim) string {
	return filepath.Join(n.opts.CDIRoot, "k8s.gpu.rota.dev-claim_"+string(c.UID)+".json")
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

func (n *gpuNode) setFaults(content string) {
	n.t.Helper()
	if err := os.WriteFile(n.opts.MockFaultFile, []byte(content), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// slice returns the node's published ResourceSlice.
func (n *gpuNode) slice(ctx context.Context) (*resourceapi.ResourceSlice, error) {
	list, err := n.cp.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var found *resourceapi.ResourceSlice
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.Driver == gpuv1.DriverName && s.Spec.Pool.Name == n.name {
			if found != nil {
				return nil, fmt.Errorf("node %s has more than one slice", n.name)
			}
			found = s
		}
	}
	if found == nil {
		return nil, fmt.Errorf("node %s has no slice yet", n.name)
	}
	return found, nil
}

// allocatedClaim creates a claim for count GPUs and writes an allocation to
// the given devices of n, as the scheduler would, with an optional GpuConfig.
func (n *gpuNode) allocatedClaim(ctx context.Context, namespace, name string, gpuConfig string, devices ...string) *resourceapi.ResourceClaim {
	n.t.Helper()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: gpuv1.DeviceClassName,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(len(devices))},
		}}}},
	}
	claim, err := n.cp.Client.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatalf("create claim: %v", err)
	}
	alloc := &resourceapi.AllocationResult{}
	for _, d := range devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: gpuv1.DriverName, Pool: n.name, Device: d,
		})
	}
	if gpuConfig != "" {
		alloc.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
			Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"},
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: gpuv1.DriverName, Parameters: runtime.RawExtension{Raw: []byte(gpuConfig)},
			}},
		}}
	}
	claim.Status.Allocation = alloc
	claim, err = n.cp.Client.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		n.t.Fatalf("allocate claim: %v", err)
	}
	return claim
}
