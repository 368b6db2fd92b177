package integration

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	resourceapi "k8s.io/api/resource/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/test/integration/framework"
)

// publishedGPU is what the slice says about one GPU, flattened for comparison.
type publishedGPU struct {
	Name, UUID, ProductName, Model, Architecture string
	CC, Driver, DriverRaw, CUDA                  string
	PCIBusID                                     string
	Index, NUMANode                              int64
	Memory                                       string
	Taints                                       []resourceapi.DeviceTaint
}

func flatten(d resourceapi.Device) publishedGPU {
	s := func(k resourceapi.QualifiedName) string {
		if a, ok := d.Attributes[k]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	v := func(k resourceapi.QualifiedName) string {
		if a, ok := d.Attributes[k]; ok && a.VersionValue != nil {
			return *a.VersionValue
		}
		return ""
	}
	i := func(k resourceapi.QualifiedName) int64 {
		if a, ok := d.Attributes[k]; ok && a.IntValue != nil {
			return *a.IntValue
		}
		return -1
	}
	mem := d.Capacity["memory"].Value
	return publishedGPU{
		Name: d.Name, UUID: s("uuid"), ProductName: s("productName"), Model: s("model"), Architecture: s("architecture"),
		CC: v("cudaComputeCapability"), Driver: v("driverVersion"), DriverRaw: s("driverVersionRaw"), CUDA: v("cudaDriverVersion"),
		PCIBusID: s("resource.kubernetes.io/pciBusID"), Index: i("index"), NUMANode: i("resource.kubernetes.io/numaNode"),
		Memory: mem.String(), Taints: d.Taints,
	}
}

func TestDriverPublishesProfileAndPrepares(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeviceClass(), framework.Namespace("ml"))
	n := startGPUNode(t, cp, "node-h100", "dgx-h100")

	info, err := n.getInfo(ctx)
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Type != "DRAPlugin" || info.Name != "gpu.rota.dev" {
		t.Errorf("GetInfo = type %q name %q", info.Type, info.Name)
	}

	// Published slice, field by field against the dgx-h100 profile.
	var want []publishedGPU
	for i := 0; i < 8; i++ {
		want = append(want, publishedGPU{
			Name: "gpu-" + string(rune('0'+i)), UUID: gpu.MockUUID("node-h100", i),
			ProductName: "NVIDIA H100 80GB HBM3", Model: "H100", Architecture: "Hopper",
			CC: "9.0.0", Driver: "560.35.3", DriverRaw: "560.35.03", CUDA: "12.6.0",
			PCIBusID: gpu.MockPCIBusID(i), Index: int64(i), NUMANode: int64(i / 4), Memory: "80Gi",
		})
	}
	var slice *resourceapi.ResourceSlice
	framework.WaitFor(t, "the node's ResourceSlice", func(ctx context.Context) (bool, string, error) {
		s, err := n.slice(ctx)
		slice = s
		return err == nil, errString(err), nil
	})
	var got []publishedGPU
	for _, d := range slice.Spec.Devices {
		got = append(got, flatten(d))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("published devices (-want +got):\n%s", diff)
	}
	if slice.Spec.NodeName == nil || *slice.Spec.NodeName != "node-h100" || slice.Spec.Pool.Name != "node-h100" {
		t.Errorf("slice node %v pool %q", slice.Spec.NodeName, slice.Spec.Pool.Name)
	}

	// Prepare: CDI spec and checkpoint; a repeat gives the same answer.
	claim := n.allocatedClaim(ctx, "ml", "train", `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","memoryMiB":40960}`, "gpu-3", "gpu-6")
	wantResp := &drapb.NodePrepareResourceResponse{Devices: []*drapb.Device{
		{RequestNames: []string{"gpu"}, PoolName: "node-h100", DeviceName: "gpu-3", CdiDeviceIds: []string{"k8s.gpu.rota.dev/claim=" + string(claim.UID) + "-gpu-3"}},
		{RequestNames: []string{"gpu"}, PoolName: "node-h100", DeviceName: "gpu-6", CdiDeviceIds: []string{"k8s.gpu.rota.dev/claim=" + string(claim.UID) + "-gpu-6"}},
	}}
	for i := 0; i < 2; i++ {
		resp, err := n.prepare(ctx, claim)
		if err != nil {
			t.Fatalf("prepare #%d: %v", i+1, err)
		}
		if diff := cmp.Diff(wantResp.Devices, resp.Devices, protocmp.Transform()); diff != "" {
			t.Errorf("prepare #%d devices (-want +got):\n%s", i+1, diff)
		}
	}
	var spec cdispec.Spec
	data, err := os.ReadFile(n.cdiPath(claim))
	if err != nil {
		t.Fatalf("CDI spec: %v", err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	visible := "NVIDIA_VISIBLE_DEVICES=" + strings.Join(sortedStrings(gpu.MockUUID("node-h100", 3), gpu.MockUUID("node-h100", 6)), ",")
	var nodes, envs []string
	for _, dn := range spec.ContainerEdits.DeviceNodes {
		nodes = append(nodes, dn.Path)
	}
	for _, d := range spec.Devices {
		envs = append(envs, d.ContainerEdits.Env...)
		for _, dn := range d.ContainerEdits.DeviceNodes {
			nodes = append(nodes, dn.Path)
		}
	}
	if diff := cmp.Diff([]string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia3", "/dev/nvidia6"}, nodes); diff != "" {
		t.Errorf("CDI device nodes (-want +got):\n%s", diff)
	}
	// memoryMiB 40960 of an 80 GiB H100: the budget the container keeps to.
	budget := []string{visible, gpuv1.EnvMemoryBudgetMiB + "=40960", gpuv1.EnvMemoryFraction + "=0.5000"}
	if diff := cmp.Diff(append(budget, budget...), envs); diff != "" {
		t.Errorf("CDI env (-want +got):\n%s", diff)
	}
	cpClaim := n.checkpointClaims()[string(claim.UID)]
	if cpClaim.State != checkpoint.PrepareCompleted || len(cpClaim.Devices) != 2 || *cpClaim.Devices[0].MemoryMiB != 40960 {
		t.Errorf("checkpoint claim = %+v", cpClaim)
	}

	// A bad config fails that claim with the field named.
	bad := n.allocatedClaim(ctx, "ml", "bad", `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`, "gpu-0")
	if _, err := n.prepare(ctx, bad); err == nil || !strings.Contains(err.Error(), "sharing.strategy: Unsupported value: \"MPS\"") {
		t.Errorf("prepare with a bad config = %v", err)
	}

	// Unprepare twice: both gone.
	for i := 0; i < 2; i++ {
		if err := n.unprepare(ctx, claim); err != nil {
			t.Fatalf("unprepare #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(n.cdiPath(claim)); !os.IsNotExist(err) {
		t.Errorf("CDI spec still there after unprepare: %v", err)
	}
	if _, ok := n.checkpointClaims()[string(claim.UID)]; ok {
		t.Error("claim still in the checkpoint after unprepare")
	}

	// Republishing identical data writes nothing.
	before, err := n.slice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n.restart()
	time.Sleep(2 * time.Second)
	after, err := n.slice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.ResourceVersion != after.ResourceVersion || before.Name != after.Name {
		t.Errorf("restart with identical GPUs rewrote the slice: %s@%s → %s@%s", before.Name, before.ResourceVersion, after.Name, after.ResourceVersion)
	}
}

func TestDriverConcurrentExclusivePrepares(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeviceClass(), framework.Namespace("ml"))
	n := startGPUNode(t, cp, "node-l4", "l4x2")
	a := n.allocatedClaim(ctx, "ml", "a", "", "gpu-1")
	b := n.allocatedClaim(ctx, "ml", "b", "", "gpu-1")
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, c := range []*resourceapi.ResourceClaim{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = n.prepare(ctx, c) }()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("want exactly one of two exclusive prepares on gpu-1 to succeed, got %v and %v", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil && !strings.Contains(err.Error(), "is already prepared exclusively for claim ml/") {
			t.Errorf("refusal does not say why: %v", err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func sortedStrings(s ...string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
