package gpu

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func discoverMock(t *testing.T, node, profile string) Inventory {
	t.Helper()
	m, err := NewMock(node, profile, testingclock.NewFakeClock(fakeStart))
	if err != nil {
		t.Fatalf("NewMock: %v", err)
	}
	if err := Init(m); err != nil {
		t.Fatalf("Init: %v", err)
	}
	inv, err := Discover(m)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return inv
}

func TestDiscoverProfiles(t *testing.T) {
	type gpuSummary struct {
		Model, Arch, CC, Product string
		MemoryBytes              uint64
	}
	h100 := gpuSummary{"H100", "Hopper", "9.0.0", "NVIDIA H100 80GB HBM3", 80 << 30}
	a100 := gpuSummary{"A100", "Ampere", "8.0.0", "NVIDIA A100-SXM4-80GB", 80 << 30}
	h200 := gpuSummary{"H200", "Hopper", "9.0.0", "NVIDIA H200 141GB HBM3e", 143771 << 20}
	l4 := gpuSummary{"L4", "Ada", "8.9.0", "NVIDIA L4", 23034 << 20}
	repeat := func(n int, s gpuSummary) []gpuSummary {
		out := make([]gpuSummary, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	tests := map[string]struct {
		profile string
		want    []gpuSummary
	}{
		"dgx-h100":      {profile: "dgx-h100", want: repeat(8, h100)},
		"dgx-a100":      {profile: "dgx-a100", want: repeat(8, a100)},
		"hgx-h200":      {profile: "hgx-h200", want: repeat(8, h200)},
		"l4x2":          {profile: "l4x2", want: repeat(2, l4)},
		"custom mix":    {profile: "h100:4,a100:4", want: append(repeat(4, h100), repeat(4, a100)...)},
		"custom spaces": {profile: " h200:1, l4:1 ", want: []gpuSummary{h200, l4}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inv := discoverMock(t, "node-a", tc.profile)
			var got []gpuSummary
			for i, g := range inv.GPUs {
				got = append(got, gpuSummary{g.Model, g.Architecture, g.CUDAComputeCapability, g.ProductName, g.MemoryBytes})
				if g.Index != i || g.Minor != i {
					t.Errorf("GPU %d: index %d minor %d", i, g.Index, g.Minor)
				}
				if g.UUID != MockUUID("node-a", i) || g.PCIBusID != MockPCIBusID(i) {
					t.Errorf("GPU %d: uuid %q bus %q not the deterministic ones", i, g.UUID, g.PCIBusID)
				}
				if g.NUMANode == nil {
					t.Errorf("GPU %d: no NUMA node", i)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			if inv.DriverVersion != "560.35.3" || inv.DriverVersionRaw != MockDriverVersion || inv.CUDADriverVersion != "12.6.0" {
				t.Errorf("versions: %q (raw %q), CUDA %q", inv.DriverVersion, inv.DriverVersionRaw, inv.CUDADriverVersion)
			}
		})
	}
}

func TestDiscoverDeterministicPerNode(t *testing.T) {
	a1 := discoverMock(t, "node-a", "dgx-h100")
	a2 := discoverMock(t, "node-a", "dgx-h100")
	b := discoverMock(t, "node-b", "dgx-h100")
	if diff := cmp.Diff(a1, a2); diff != "" {
		t.Errorf("same node, different inventory (-first +second):\n%s", diff)
	}
	seen := map[string]bool{}
	for _, inv := range []Inventory{a1, b} {
		for _, g := range inv.GPUs {
			if seen[g.UUID] {
				t.Errorf("UUID %s appears twice across nodes", g.UUID)
			}
			seen[g.UUID] = true
		}
	}
	if got, want := a1.GPUs[3].PCIBusID, "0000:5d:00.0"; got != want {
		t.Errorf("bus ID of GPU 3 = %q, want %q", got, want)
	}
	if got := a1.GPUs[0].NUMANode; !cmp.Equal(got, ptr.To(0)) {
		t.Errorf("NUMA node of GPU 0 = %v", got)
	}
	if got := a1.GPUs[7].NUMANode; !cmp.Equal(got, ptr.To(1)) {
		t.Errorf("NUMA node of GPU 7 = %v", got)
	}
}

func TestParseProfileErrors(t *testing.T) {
	tests := map[string]string{
		"empty":         "",
		"unknown kind":  "h900:2",
		"zero count":    "h100:0",
		"bad count":     "h100:x",
		"too many GPUs": "h100:16,a100:1",
	}
	for name, profile := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseProfile(profile); err == nil {
				t.Errorf("ParseProfile(%q) succeeded", profile)
			}
		})
	}
}

func TestRealNVMLWithoutDriver(t *testing.T) {
	err := Init(NewReal())
	if err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Errorf("Init without a driver = %v, want ErrNoDriver", err)
	}
}
