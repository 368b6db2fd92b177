// Package gpu discovers the GPUs of a node through NVML and describes them in
// the driver's own terms. Real NVML and the mock profiles go through the same
// code: both are a github.com/NVIDIA/go-nvml nvml.Interface, which
// github.com/NVIDIA/go-nvlib walks for the GPUs and their MIG mode.
package gpu

// GPU is one physical GPU as the driver publishes it. Version fields are
// already strict semver; the raw strings NVML reported are kept beside them.
type GPU struct {
	Index                 int
	Minor                 int
	UUID                  string
	ProductName           string
	Model                 string
	Architecture          string
	CUDAComputeCapability string
	MemoryBytes           uint64
	// PCIBusID is the canonical lower-case form "0000:3b:00.0"; empty when unknown.
	PCIBusID string
	// NUMANode is nil when the platform reports no NUMA affinity.
	NUMANode *int
}

// Inventory is everything discovery found on one node.
type Inventory struct {
	DriverVersion        string
	DriverVersionRaw     string
	CUDADriverVersion    string
	CUDADriverVersionRaw int
	// GPUs are the GPUs the driver publishes, in NVML index order.
	GPUs []GPU
	// Skipped are GPUs NVML lists that the driver does not publish, with
	// the reason; callers log them (docs/driver.md, "MIG").
	Skipped []SkippedGPU
}

// SkippedGPU is a GPU that discovery described but leaves unpublished.
type SkippedGPU struct {
	GPU
	Reason string
}

// ByUUID returns the GPU with the given UUID.
func (inv *Inventory) ByUUID(uuid string) (GPU, bool) {
	for _, g := range inv.GPUs {
		if g.UUID == uuid {
			return g, true
		}
	}
	return GPU{}, false
}

// ByIndex returns the GPU with the given NVML index.
func (inv *Inventory) ByIndex(index int) (GPU, bool) {
	for _, g := range inv.GPUs {
		if g.Index == index {
			return g, true
		}
	}
	return GPU{}, false
}
