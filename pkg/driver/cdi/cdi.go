// Package cdi writes one CDI spec per prepared claim, in the shape the NVIDIA
// container toolkit produces: the GPU's own /dev/nvidia<minor>, the control and
// UVM nodes, and NVIDIA_VISIBLE_DEVICES by UUID. Specs are named after the
// claim UID so a runtime cache never confuses two claims.
package cdi

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

const (
	// Vendor and Class make the CDI kind k8s.gpu.rota.dev/claim.
	Vendor = gpuv1.CDIVendor
	Class  = "claim"
	Kind   = Vendor + "/" + Class
)

// Device is one GPU of a claim as CDI needs it.
type Device struct {
	// Name is the device name in the pool ("gpu-3").
	Name  string
	UUID  string
	Minor int
	// MemoryMiB is the VRAM the claim may use on this GPU (its GpuConfig
	// memoryMiB, summed over the claim's requests on the GPU); nil when
	// the claim was granted no budget here.
	MemoryMiB *int64
	// TotalMiB is the GPU's memory.
	TotalMiB int64
}

// Writer writes and removes claim specs in one directory (the runtime's CDI
// directory, usually /var/run/cdi).
type Writer struct {
	dir        string
	driverRoot string
	cache      *cdiapi.Cache
}

// Option configures a Writer.
type Option func(*Writer)

// WithDriverRoot says where the GPUs' device nodes are on the host: a spec
// names /dev/nvidia<minor> inside the container and root/dev/nvidia<minor>
// as its host path. Empty or "/" is the host's own /dev; a driver
// container (the GPU operator's) installs them under its root, e.g.
// /run/nvidia/driver.
func WithDriverRoot(root string) Option {
	return func(w *Writer) { w.driverRoot = root }
}

// NewWriter creates dir if needed.
func NewWriter(dir string, opts ...Option) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating CDI directory: %w", err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("opening CDI directory %s: %w", dir, err)
	}
	w := &Writer{dir: dir, cache: cache}
	for _, o := range opts {
		o(w)
	}
	return w, nil
}

// SpecName is the file name (without extension) of a claim's spec.
func SpecName(claimUID string) string {
	return cdiapi.GenerateTransientSpecName(Vendor, Class, claimUID)
}

// Path is where the claim's spec lives.
func (w *Writer) Path(claimUID string) string {
	return filepath.Join(w.dir, SpecName(claimUID)+".json")
}

// DeviceID is the fully qualified CDI device name of one GPU of a claim.
func DeviceID(claimUID, deviceName string) string {
	return Kind + "=" + cdiDeviceName(claimUID, deviceName)
}

func cdiDeviceName(claimUID, deviceName string) string { return claimUID + "-" + deviceName }

// Spec builds the claim's spec. Every device of the claim sets the same
// NVIDIA_VISIBLE_DEVICES (all of the claim's UUIDs) and, when every GPU of
// the claim has a budget, the same ROTA_GPU_MEMORY_BUDGET_MIB and
// ROTA_GPU_MEMORY_FRACTION (the tightest over its GPUs), so injecting
// several of them into one container never yields conflicting values.
func Spec(claimUID string, devices []Device) *cdispec.Spec {
	return SpecUnder("", claimUID, devices)
}

// SpecUnder is Spec with the device nodes' host paths under driverRoot
// (WithDriverRoot); "" or "/" is Spec.
func SpecUnder(driverRoot, claimUID string, devices []Device) *cdispec.Spec {
	node := func(path string) *cdispec.DeviceNode {
		n := &cdispec.DeviceNode{Path: path}
		if driverRoot != "" && driverRoot != "/" {
			n.HostPath = filepath.Join(driverRoot, path)
		}
		return n
	}
	uuids := make([]string, 0, len(devices))
	for _, d := range devices {
		uuids = append(uuids, d.UUID)
	}
	sort.Strings(uuids)
	env := append([]string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}, budgetEnv(devices)...)
	spec := &cdispec.Spec{
		Version: cdispec.CurrentVersion,
		Kind:    Kind,
		ContainerEdits: cdispec.ContainerEdits{
			DeviceNodes: []*cdispec.DeviceNode{
				node("/dev/nvidiactl"),
				node("/dev/nvidia-uvm"),
				node("/dev/nvidia-uvm-tools"),
			},
		},
	}
	for _, d := range devices {
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: cdiDeviceName(claimUID, d.Name),
			ContainerEdits: cdispec.ContainerEdits{
				Env:         env,
				DeviceNodes: []*cdispec.DeviceNode{node(fmt.Sprintf("/dev/nvidia%d", d.Minor))},
			},
		})
	}
	return spec
}

// budgetEnv is the granted budget for the container: the smallest
// budget over the claim's GPUs, in MiB and as a fraction of that GPU's
// memory (the smallest fraction over its GPUs). A time-sliced GPU has no
// hardware memory cap; these say how much the workload may take. Nothing
// is set unless every GPU of the claim has a budget.
func budgetEnv(devices []Device) []string {
	if len(devices) == 0 {
		return nil
	}
	var mib, frac int64 = -1, -1
	for _, d := range devices {
		if d.MemoryMiB == nil || d.TotalMiB <= 0 {
			return nil
		}
		if mib < 0 || *d.MemoryMiB < mib {
			mib = *d.MemoryMiB
		}
		if f := gpuv1.MemoryFractionTenThousandths(*d.MemoryMiB, d.TotalMiB); frac < 0 || f < frac {
			frac = f
		}
	}
	return []string{
		fmt.Sprintf("%s=%d", gpuv1.EnvMemoryBudgetMiB, mib),
		fmt.Sprintf("%s=%d.%04d", gpuv1.EnvMemoryFraction, frac/10000, frac%10000),
	}
}

// Write writes (or replaces) the claim's spec atomically.
func (w *Writer) Write(claimUID string, devices []Device) error {
	if err := w.cache.WriteSpec(SpecUnder(w.driverRoot, claimUID, devices), SpecName(claimUID)+".json"); err != nil {
		return fmt.Errorf("writing CDI spec for claim %s: %w", claimUID, err)
	}
	return nil
}

// Exists reports whether the claim's spec is on disk.
func (w *Writer) Exists(claimUID string) bool {
	_, err := os.Stat(w.Path(claimUID))
	return err == nil
}

// Remove deletes the claim's spec; a missing spec is not an error.
func (w *Writer) Remove(claimUID string) error {
	if err := w.cache.RemoveSpec(SpecName(claimUID) + ".json"); err != nil {
		return fmt.Errorf("removing CDI spec for claim %s: %w", claimUID, err)
	}
	return nil
}
