package gpu

import (
	"errors"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoDriver reports that the NVML library could not be loaded: no NVIDIA
// driver is installed on this node (or it is not mounted into the container).
var ErrNoDriver = errors.New("NVIDIA driver not found: libnvidia-ml.so.1 could not be loaded (run on a GPU node with the driver mounted, or pass --mock-profile for a simulated node)")

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

// Discover reads the inventory of an initialised NVML. A GPU that cannot be
// described fails discovery as a whole: publishing a partial node silently
// would hide a broken GPU from operators.
func Discover(lib nvml.Interface) (Inventory, error) {
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
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return inv, fmt.Errorf("counting GPUs: %w", ret)
	}
	for i := 0; i < count; i++ {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return inv, fmt.Errorf("opening GPU %d: %w", i, ret)
		}
		g, err := describe(i, dev)
		if err != nil {
			return inv, fmt.Errorf("describing GPU %d: %w", i, err)
		}
		inv.GPUs = append(inv.GPUs, g)
	}
	return inv, nil
}

func describe(index int, dev nvml.Device) (GPU, error) {
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
	if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBusID = canonicalBusID(pci.BusId)
	}
	if node, ret := dev.GetNumaNodeId(); ret == nvml.SUCCESS && node >= 0 {
		g.NUMANode = &node
	}
	return g, nil
}

// canonicalBusID turns NVML's "00000000:3B:00.0" into the kernel's sysfs form
// "0000:3b:00.0", which is what resource.kubernetes.io/pciBusID expects.
func canonicalBusID(raw [32]int8) string {
	b := make([]byte, 0, len(raw))
	for _, c := range raw {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	s := strings.ToLower(string(b))
	if s == "" {
		return ""
	}
	if domain, rest, ok := strings.Cut(s, ":"); ok && len(domain) > 4 {
		s = domain[len(domain)-4:] + ":" + rest
	}
	return s
}
