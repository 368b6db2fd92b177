package cdi

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

func TestWriteAndRemove(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	devs := []Device{{Name: "gpu-3", UUID: "GPU-bbb", Minor: 3}, {Name: "gpu-1", UUID: "GPU-aaa", Minor: 1}}
	if err := w.Write("uid-1", devs); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(w.Path("uid-1"))
	if err != nil {
		t.Fatal(err)
	}
	var got cdispec.Spec
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	env := []string{"NVIDIA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb"}
	want := cdispec.Spec{
		Version: cdispec.CurrentVersion,
		Kind:    "k8s.gpu.rota.dev/claim",
		ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{
			{Path: "/dev/nvidiactl"}, {Path: "/dev/nvidia-uvm"}, {Path: "/dev/nvidia-uvm-tools"},
		}},
		Devices: []cdispec.Device{
			{Name: "uid-1-gpu-3", ContainerEdits: cdispec.ContainerEdits{Env: env, DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia3"}}}},
			{Name: "uid-1-gpu-1", ContainerEdits: cdispec.ContainerEdits{Env: env, DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia1"}}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}

	// A runtime resolves the IDs the driver hands to the kubelet.
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if cache.GetDevice(DeviceID("uid-1", d.Name)) == nil {
			t.Errorf("runtime cannot resolve %s: %v", DeviceID("uid-1", d.Name), cache.GetErrors())
		}
	}

	if err := w.Remove("uid-1"); err != nil {
		t.Fatal(err)
	}
	if w.Exists("uid-1") {
		t.Error("spec still exists after Remove")
	}
	if err := w.Remove("uid-1"); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

// A claim granted a budget on every GPU tells its containers the tightest
// one; a claim without a budget on some GPU says nothing.
func TestSpecBudgetEnv(t *testing.T) {
	mib := func(n int64) *int64 { return &n }
	tests := map[string]struct {
		devices []Device
		want    []string
	}{
		"one H200, 40960 MiB": {
			devices: []Device{{Name: "gpu-0", UUID: "GPU-a", MemoryMiB: mib(40960), TotalMiB: 143771}},
			want:    []string{"NVIDIA_VISIBLE_DEVICES=GPU-a", "ROTA_GPU_MEMORY_BUDGET_MIB=40960", "ROTA_GPU_MEMORY_FRACTION=0.2848"},
		},
		"two GPUs: the tightest": {
			devices: []Device{{Name: "gpu-0", UUID: "GPU-a", MemoryMiB: mib(40960), TotalMiB: 143771}, {Name: "gpu-1", UUID: "GPU-b", MemoryMiB: mib(20000), TotalMiB: 81559}},
			want:    []string{"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b", "ROTA_GPU_MEMORY_BUDGET_MIB=20000", "ROTA_GPU_MEMORY_FRACTION=0.2452"},
		},
		"a GPU without budget": {
			devices: []Device{{Name: "gpu-0", UUID: "GPU-a", MemoryMiB: mib(40960), TotalMiB: 143771}, {Name: "gpu-1", UUID: "GPU-b", TotalMiB: 143771}},
			want:    []string{"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := Spec("uid", tc.devices)
			for _, d := range spec.Devices {
				if diff := cmp.Diff(tc.want, d.ContainerEdits.Env); diff != "" {
					t.Errorf("device %s env (-want +got):\n%s", d.Name, diff)
				}
			}
		})
	}
}

// Under a driver root the container still sees /dev/nvidia<minor>, and the
// runtime takes the node from the driver root on the host.
func TestSpecUnderDriverRoot(t *testing.T) {
	w, err := NewWriter(t.TempDir(), WithDriverRoot("/run/nvidia/driver"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("uid-1", []Device{{Name: "gpu-2", UUID: "GPU-ccc", Minor: 2}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(w.Path("uid-1"))
	if err != nil {
		t.Fatal(err)
	}
	var got cdispec.Spec
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	var nodes []cdispec.DeviceNode
	for _, n := range got.ContainerEdits.DeviceNodes {
		nodes = append(nodes, *n)
	}
	for _, n := range got.Devices[0].ContainerEdits.DeviceNodes {
		nodes = append(nodes, *n)
	}
	want := []cdispec.DeviceNode{
		{Path: "/dev/nvidiactl", HostPath: "/run/nvidia/driver/dev/nvidiactl"},
		{Path: "/dev/nvidia-uvm", HostPath: "/run/nvidia/driver/dev/nvidia-uvm"},
		{Path: "/dev/nvidia-uvm-tools", HostPath: "/run/nvidia/driver/dev/nvidia-uvm-tools"},
		{Path: "/dev/nvidia2", HostPath: "/run/nvidia/driver/dev/nvidia2"},
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("device nodes (-want +got):\n%s", diff)
	}
	// "/" is the host's own /dev: no host path, as without the option.
	if n := SpecUnder("/", "uid-2", []Device{{Name: "gpu-0", Minor: 0}}).Devices[0].ContainerEdits.DeviceNodes[0]; n.HostPath != "" {
		t.Errorf("driver root /: host path %q, want none", n.HostPath)
	}
}
