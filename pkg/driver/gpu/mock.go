package gpu

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/utils/clock"
)

// dgxBuses are the PCI buses of the eight GPUs in a DGX H100, reused by every
// mock profile so that mock bus IDs look like a real machine's.
var dgxBuses = []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

// Mock is a simulated NVML: go-nvml's mock server with the gaps filled
// (deterministic UUIDs and PCI bus IDs per node name, NUMA nodes, event sets,
// ECC counters) and with faults that can be injected at run time.
type Mock struct {
	*server.Server
	clock  clock.WithTicker
	events chan nvml.EventData

	mu     sync.Mutex
	faults map[int]uint64 // GPU index → active XID
}

// NewMock builds the simulated machine for profile on the node nodeName.
func NewMock(nodeName, profile string, clk clock.WithTicker) (*Mock, error) {
	configs, err := ParseProfile(profile)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(
		server.WithGPUs(configs...),
		server.WithDriverVersion(MockDriverVersion),
		server.WithNVMLVersion("12."+MockDriverVersion),
		server.WithCUDADriverVersion(MockCUDADriverVersion),
	)
	if err != nil {
		return nil, fmt.Errorf("building mock NVML: %w", err)
	}
	m := &Mock{Server: srv, clock: clk, events: make(chan nvml.EventData, 64), faults: map[int]uint64{}}
	for i, d := range srv.Devices {
		m.fillDevice(nodeName, i, len(srv.Devices), d.(*server.Device))
	}
	srv.EventSetCreateFunc = m.newEventSet
	return m, nil
}

// MockUUID is the deterministic UUID of GPU index on nodeName.
func MockUUID(nodeName string, index int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("rota-mock/%s/%d", nodeName, index)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// MockPCIBusID is the deterministic PCI bus ID of GPU index.
func MockPCIBusID(index int) string {
	return fmt.Sprintf("0000:%02x:00.0", dgxBusOf(index))
}

func (m *Mock) fillDevice(nodeName string, index, total int, d *server.Device) {
	d.UUID = MockUUID(nodeName, index)
	d.PciBusID = MockPCIBusID(index)
	numa := index * 2 / total
	lost := func() bool { return m.activeXID(index) == xidFallenOffBus }

	uuid, getName, getMem := d.GetUUIDFunc, d.GetNameFunc, d.GetMemoryInfoFunc
	d.GetUUIDFunc = func() (string, nvml.Return) {
		if lost() {
			return "", nvml.ERROR_GPU_IS_LOST
		}
		return uuid()
	}
	d.GetNameFunc = func() (string, nvml.Return) {
		if lost() {
			return "", nvml.ERROR_GPU_IS_LOST
		}
		return getName()
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if lost() {
			return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
		}
		return getMem()
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{PciDeviceId: d.Config.PciDeviceId, Domain: 0, Bus: uint32(dgxBusOf(index))}
		// NVML reports an eight-digit domain in upper case.
		copyCString(p.BusId[:], fmt.Sprintf("0000%s", upper(d.PciBusID)))
		return p, nvml.SUCCESS
	}
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return numa, nvml.SUCCESS }
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		switch {
		case lost():
			return 0, nvml.ERROR_GPU_IS_LOST
		case isECCXID(m.activeXID(index)):
			return 1, nvml.SUCCESS
		default:
			return 0, nvml.SUCCESS
		}
	}
}

func dgxBusOf(index int) int {
	if index < len(dgxBuses) {
		return dgxBuses[index]
	}
	return 0x100 + index
}

func copyCString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func (m *Mock) activeXID(index int) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.faults[index]
}

// newEventSet returns an event set that delivers the XIDs injected into m.
func (m *Mock) newEventSet() (nvml.EventSet, nvml.Return) {
	es := &mock.EventSet{}
	es.WaitFunc = func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
		t := m.clock.NewTimer(timeDurationMs(timeoutMs))
		defer t.Stop()
		select {
		case ev := <-m.events:
			return ev, nvml.SUCCESS
		case <-t.C():
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	es.FreeFunc = func() nvml.Return { return nvml.SUCCESS }
	return es, nvml.SUCCESS
}
