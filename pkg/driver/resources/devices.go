// Package resources turns the discovered GPUs and their health into the
// ResourceSlice content the driver publishes.
package resources

import (
	"fmt"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/health"
)

// API limits on a device (resource.k8s.io/v1).
const (
	maxAttributesAndCapacity = 32
	maxStringValueLength     = 64
)

// Options choose how the GPUs are published.
type Options struct {
	// ConsumableMemory publishes every GPU with allowMultipleAllocations and
	// its memory as consumable capacity whose request policy defaults to the
	// whole GPU: a claim that asks for no memory still gets the GPU to
	// itself, while time-sliced claims that ask capacity.requests.memory
	// share it, the allocator keeping their sum within the GPU's memory.
	// Off, each GPU goes to one claim at a time (and the scheduler keeps its
	// fast path for devices that cannot be shared).
	ConsumableMemory bool
}

// minMemoryRequestBytes is the smallest share of a GPU's memory a claim can
// consume (1 MiB); smaller requests are rounded up to it.
const minMemoryRequestBytes = 1 << 20

// DeviceName is the stable per-node name of the GPU with NVML index i.
func DeviceName(index int) string { return "gpu-" + strconv.Itoa(index) }

// Device describes one GPU as a ResourceSlice device. Attributes that are
// unknown (no NUMA affinity, a version NVML reported in a non-numeric form) are
// omitted rather than guessed.
func Device(inv *gpu.Inventory, g gpu.GPU, st health.Status, opts Options) resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		gpuv1.AttributeUUID:        str(g.UUID),
		gpuv1.AttributeProductName: str(g.ProductName),
		gpuv1.AttributeIndex:       {IntValue: ptr.To(int64(g.Index))},
	}
	setStr := func(name resourceapi.QualifiedName, v string) {
		if v != "" {
			attrs[name] = str(v)
		}
	}
	setVersion := func(name resourceapi.QualifiedName, v string) {
		if v != "" {
			attrs[name] = resourceapi.DeviceAttribute{VersionValue: ptr.To(v)}
		}
	}
	setStr(gpuv1.AttributeModel, g.Model)
	setStr(gpuv1.AttributeArchitecture, g.Architecture)
	setVersion(gpuv1.AttributeCUDAComputeCapability, g.CUDAComputeCapability)
	setVersion(gpuv1.AttributeDriverVersion, inv.DriverVersion)
	setStr("driverVersionRaw", inv.DriverVersionRaw)
	setVersion(gpuv1.AttributeCUDADriverVersion, inv.CUDADriverVersion)
	if g.PCIBusID != "" {
		attrs[deviceattribute.StandardDeviceAttributePCIBusID] = str(g.PCIBusID)
	}
	if g.NUMANode != nil {
		attrs[deviceattribute.StandardDeviceAttributeNUMANode] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(*g.NUMANode))}
	}
	memory := resourceapi.DeviceCapacity{Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)}
	d := resourceapi.Device{
		Name:       DeviceName(g.Index),
		Attributes: attrs,
	}
	if opts.ConsumableMemory {
		d.AllowMultipleAllocations = ptr.To(true)
		memory.RequestPolicy = &resourceapi.CapacityRequestPolicy{
			Default:    ptr.To(memory.Value.DeepCopy()),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: resource.NewQuantity(minMemoryRequestBytes, resource.BinarySI)},
		}
	}
	d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{gpuv1.CapacityMemory: memory}
	if t := Taint(st); t != nil {
		d.Taints = []resourceapi.DeviceTaint{*t}
	}
	return d
}

// Taint is the device taint for a health status, nil for a healthy GPU.
func Taint(st health.Status) *resourceapi.DeviceTaint {
	switch st.State {
	case health.Unhealthy:
		return &resourceapi.DeviceTaint{Key: gpuv1.UnhealthyTaintKey, Value: st.Reason, Effect: resourceapi.DeviceTaintEffectNoSchedule}
	case health.Degraded:
		return &resourceapi.DeviceTaint{Key: gpuv1.UnhealthyTaintKey, Value: st.Reason, Effect: resourceapi.DeviceTaintEffectNone}
	default:
		return nil
	}
}

func str(s string) resourceapi.DeviceAttribute {
	if len(s) > maxStringValueLength {
		s = s[:maxStringValueLength]
	}
	return resourceapi.DeviceAttribute{StringValue: ptr.To(s)}
}

// ForNode is everything the driver publishes for its node: one pool named after
// the node with one slice that lists every GPU in index order, tainted by
// health. statuses is keyed by NVML index; a missing entry means healthy.
func ForNode(nodeName string, inv *gpu.Inventory, statuses map[int]health.Status, opts Options) (resourceslice.DriverResources, error) {
	devices := make([]resourceapi.Device, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		d := Device(inv, g, statuses[g.Index], opts)
		if err := checkLimits(d); err != nil {
			return resourceslice.DriverResources{}, err
		}
		devices = append(devices, d)
	}
	return resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{
			nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
		},
	}, nil
}

// checkLimits refuses a device the API server would reject, which would make
// it reject the whole slice and leave the node without any published GPU.
func checkLimits(d resourceapi.Device) error {
	if n := len(d.Attributes) + len(d.Capacity); n > maxAttributesAndCapacity {
		return fmt.Errorf("device %s: %d attributes and capacities, the API allows %d", d.Name, n, maxAttributesAndCapacity)
	}
	for name, a := range d.Attributes {
		if a.StringValue != nil && len(*a.StringValue) > maxStringValueLength {
			return fmt.Errorf("device %s: attribute %s is longer than %d characters", d.Name, name, maxStringValueLength)
		}
	}
	return nil
}
