package gpu

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

func newInitialisedMock(t *testing.T, profile string) *Mock {
	t.Helper()
	m, err := NewMock("node-a", profile, testingclock.NewFakeClock(fakeStart))
	if err != nil {
		t.Fatalf("NewMock: %v", err)
	}
	if err := Init(m); err != nil {
		t.Fatalf("Init: %v", err)
	}
	return m
}

func indexes(gpus []GPU) []int {
	var out []int
	for _, g := range gpus {
		out = append(out, g.Index)
	}
	return out
}

func TestDiscoverSkipsMIGEnabledGPU(t *testing.T) {
	m := newInitialisedMock(t, "dgx-a100")
	if _, ret := m.Devices[2].SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatalf("enabling MIG on the mock: %v", ret)
	}
	inv, err := Discover(m)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if diff := cmp.Diff([]int{0, 1, 3, 4, 5, 6, 7}, indexes(inv.GPUs)); diff != "" {
		t.Errorf("published GPU indexes (-want +got):\n%s", diff)
	}
	if _, ok := inv.ByUUID(MockUUID("node-a", 2)); ok {
		t.Errorf("the MIG-enabled GPU is published")
	}
	if len(inv.Skipped) != 1 {
		t.Fatalf("Skipped = %+v, want the one MIG-enabled GPU", inv.Skipped)
	}
	got := inv.Skipped[0]
	if got.Index != 2 || got.UUID != MockUUID("node-a", 2) || got.Model != "A100" || got.Reason != SkipReasonMIGEnabled {
		t.Errorf("Skipped[0] = %+v, want GPU 2 (A100, %s) for %q", got, MockUUID("node-a", 2), SkipReasonMIGEnabled)
	}
}

func TestDiscoverMIGDisabledAgainIsPublished(t *testing.T) {
	m := newInitialisedMock(t, "l4x2")
	_, _ = m.Devices[0].SetMigMode(nvml.DEVICE_MIG_ENABLE)
	_, _ = m.Devices[0].SetMigMode(nvml.DEVICE_MIG_DISABLE)
	inv, err := Discover(m)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if len(inv.GPUs) != 2 || len(inv.Skipped) != 0 {
		t.Errorf("GPUs %v, skipped %+v; want both GPUs published", indexes(inv.GPUs), inv.Skipped)
	}
}

// go-nvlib leaves out the display adapter of a DGX Station; the other GPUs
// keep their NVML index.
func TestDiscoverLeavesOutDGXDisplay(t *testing.T) {
	m := newInitialisedMock(t, "l4x2")
	m.Devices[0].(*server.Device).Config.Name = "NVIDIA DGX Display"
	inv, err := Discover(m)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if diff := cmp.Diff([]int{1}, indexes(inv.GPUs)); diff != "" {
		t.Errorf("published GPU indexes (-want +got):\n%s", diff)
	}
}

func TestDiscoverLostGPUFails(t *testing.T) {
	m := newInitialisedMock(t, "l4x2")
	if err := m.InjectXID(1, 79); err != nil {
		t.Fatal(err)
	}
	_, err := Discover(m)
	if err == nil || !strings.Contains(err.Error(), nvml.ERROR_GPU_IS_LOST.Error()) {
		t.Errorf("Discover with GPU 1 lost = %v, want an error naming %q", err, nvml.ERROR_GPU_IS_LOST.Error())
	}
}

func TestPCIBusID(t *testing.T) {
	tests := map[string]struct {
		busID string
		ret   nvml.Return
		want  string
	}{
		"NVML's eight-digit upper-case domain": {busID: "00000000:3B:00.0", want: "0000:3b:00.0"},
		"non-zero domain":                      {busID: "00000002:DB:00.0", want: "0002:db:00.0"},
		"already the sysfs form":               {busID: "0000:5d:00.0", want: "0000:5d:00.0"},
		"domain over 16 bits is kept whole":    {busID: "00010000:3B:00.0", want: "00010000:3b:00.0"},
		"empty":                                {busID: "", want: ""},
		"PCI info not supported":               {ret: nvml.ERROR_NOT_SUPPORTED, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nd := &mock.Device{GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
				var p nvml.PciInfo
				copyCString(p.BusId[:], tc.busID)
				return p, tc.ret // the zero value is nvml.SUCCESS
			}}
			dev, err := device.New(&mock.Interface{}).NewDevice(nd)
			if err != nil {
				t.Fatal(err)
			}
			if got := pciBusID(dev); got != tc.want {
				t.Errorf("pciBusID(%q) = %q, want %q", tc.busID, got, tc.want)
			}
		})
	}
}
