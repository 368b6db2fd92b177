package gpu

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoDriver reports that the NVML library could not be loaded: no NVIDIA
// driver is installed on this node (or it is not mounted into the container).
var ErrNoDriver = errors.New("NVIDIA driver not found: libnvidia-ml.so.1 could not be loaded (run on a GPU node with the driver mounted, or pass --mock-profile for a simulated node)")

// SkipReasonMIGEnabled is why a GPU in MIG mode is not published: the driver
// hands out whole GPUs, and a whole GPU in MIG mode runs no CUDA work
// (docs/driver.md, "MIG").
const SkipReasonMIGEnabled = "MIG mode is enabled; the driver publishes whole GPUs only"

// Init initialises NVML. It must succeed before any other call on lib: real
// NVML kills the process when called uninitialised.
func Init(lib nvml.Interface) error {
	ret := lib.Init()
	switch ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return ErrNoDriver
	default:
		return fmt.Errorf("initialising NVML: %w", ret)
	}
}

// Discover reads the inventory of an initialised NVML. GPUs are enumerated
// through go-nvlib, which also leaves out the display adapter of DGX
// Stations. A GPU that cannot be described fails discovery as a whole:
// publishing a partial node silently would hide a broken GPU from operators.
// A GPU in MIG mode is described but listed in Inventory.Skipped, for the
// caller to report.
func Discover(lib nvml.Interface) (Inventory, error) {
	inv, err := readVersions(lib)
	if err != nil {
		return inv, err
	}
	// go-nvlib formats the callback's error with %v; keeping it here keeps
	// the NVML return code in the chain for errors.Is.
	var describeErr error
	err = device.New(lib).VisitDevices(func(index int, dev device.Device) error {
		g, err := describe(index, dev)
		if err != nil {
			describeErr = fmt.Errorf("describing GPU %d: %w", index, err)
			return describeErr
		}
		migEnabled, err := dev.IsMigEnabled()
		if err != nil {
			describeErr = fmt.Errorf("reading the MIG mode of GPU %d: %w", index, err)
			return describeErr
		}
		if migEnabled {
			inv.Skipped = append(inv.Skipped, SkippedGPU{GPU: g, Reason: SkipReasonMIGEnabled})
			return nil
		}
		inv.GPUs = append(inv.GPUs, g)
		return nil
	})
	if describeErr != nil {
		return inv, describeErr
	}
	if err != nil {
		return inv, fmt.Errorf("listing GPUs: %w", err)
	}
	return inv, nil
}

func readVersions(lib nvml.Interface) (Inventory, error) {
	var inv Inventory
	raw, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return inv, fmt.Errorf("reading driver version: %w", ret)
	}
	inv.DriverVersionRaw = raw
	if v, err := NormalizeSemver(raw); err == nil {
		inv.DriverVersion = v
	}
	cuda, ret := lib.SystemGetCudaDriverVersion()
	if ret != nvml.SUCCESS {
		return inv, fmt.Errorf("reading CUDA driver version: %w", ret)
	}
	inv.CUDADriverVersionRaw = cuda
	if v, err := CUDAVersionString(cuda); err == nil {
		inv.CUDADriverVersion = v
	}
	return inv, nil
}

// describe reads what the driver publishes about one GPU. Architecture and
// compute capability are formatted here rather than by go-nvlib because the
// published values are part of the attribute contract ("Ada", strict semver
// "8.9.0"), and go-nvlib's strings differ ("Ada Lovelace", "8.9").
func describe(index int, dev device.Device) (GPU, error) {
	g := GPU{Index: index}
	var ret nvml.Return
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("uuid: %w", ret)
	}
	if g.ProductName, ret = dev.GetName(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("name: %w", ret)
	}
	g.Model = ModelFromName(g.ProductName)
	if arch, ret := dev.GetArchitecture(); ret == nvml.SUCCESS {
		g.Architecture = ArchitectureName(arch)
	}
	if major, minor, ret := dev.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		g.CUDAComputeCapability = fmt.Sprintf("%d.%d.0", major, minor)
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("memory: %w", ret)
	}
	g.MemoryBytes = mem.Total
	if g.Minor, ret = dev.GetMinorNumber(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("minor number: %w", ret)
	}
	g.PCIBusID = pciBusID(dev)
	if node, ret := dev.GetNumaNodeId(); ret == nvml.SUCCESS && node >= 0 {
		g.NUMANode = &node
	}
	return g, nil
}

// pciBusID is the GPU's bus ID in the kernel's sysfs form "0000:3b:00.0",
// which is what resource.kubernetes.io/pciBusID expects: go-nvlib lower-cases
// NVML's "00000000:3B:00.0" and drops the four leading zeros of the domain.
// It is "" when NVML reports none.
func pciBusID(dev device.Device) string {
	id, err := dev.GetPCIBusID()
	if err != nil {
		return ""
	}
	return id
}
