package health

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/driver/gpu"
)

// Options tune a Monitor.
type Options struct {
	// ProbeInterval is how often every GPU is probed (opened, memory read,
	// ECC counter read); recovery is noticed at this pace. Default 5s.
	ProbeInterval time.Duration
	// XIDHoldTime keeps a GPU tainted after its last XID, so that a GPU that
	// raises the same XID every minute does not flap. Default 5m.
	XIDHoldTime time.Duration
	// ECCThreshold is the number of volatile uncorrected ECC errors above which
	// a GPU is unhealthy. Default 0.
	ECCThreshold uint64
	// EventWait bounds one NVML event wait, so the loop notices cancellation.
	// Default 500ms.
	EventWait time.Duration
}

func (o *Options) defaults() {
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 5 * time.Second
	}
	if o.XIDHoldTime < 0 {
		o.XIDHoldTime = 0
	} else if o.XIDHoldTime == 0 {
		o.XIDHoldTime = 5 * time.Minute
	}
	if o.EventWait <= 0 {
		o.EventWait = 500 * time.Millisecond
	}
}

type xidRecord struct {
	xid uint64
	at  time.Time
}

// Monitor tracks the health of a node's GPUs from NVML events and probes.
type Monitor struct {
	lib   nvml.Interface
	inv   *gpu.Inventory
	clock clock.WithTicker
	opts  Options

	mu          sync.Mutex
	critical    map[int]xidRecord
	application map[int]xidRecord
	statuses    map[int]Status
	subscribers map[chan struct{}]struct{}
}

// NewMonitor starts with every GPU healthy; Run corrects that at once.
func NewMonitor(lib nvml.Interface, inv *gpu.Inventory, clk clock.WithTicker, opts Options) *Monitor {
	opts.defaults()
	m := &Monitor{
		lib: lib, inv: inv, clock: clk, opts: opts,
		critical: map[int]xidRecord{}, application: map[int]xidRecord{},
		statuses: map[int]Status{}, subscribers: map[chan struct{}]struct{}{},
	}
	for _, g := range inv.GPUs {
		m.statuses[g.Index] = Status{State: Healthy}
	}
	return m
}

// Statuses returns the current health by GPU index.
func (m *Monitor) Statuses() map[int]Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.statuses)
}

// Subscribe returns a channel that receives a value after any health change
// (coalesced) and a function to stop receiving.
func (m *Monitor) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.subscribers[ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.subscribers, ch)
		m.mu.Unlock()
	}
}

// Run watches events and probes until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	handles, es, err := m.register(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = es.Free() }()
	m.evaluateAll(ctx)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.eventLoop(ctx, es, handles)
	}()
	ticker := m.clock.NewTicker(m.opts.ProbeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			logger.V(2).Info("Health monitor stopped")
			return nil
		case <-ticker.C():
			m.evaluateAll(ctx)
		}
	}
}

// register subscribes to XID events on every GPU that supports them.
func (m *Monitor) register(ctx context.Context) (map[nvml.Device]int, nvml.EventSet, error) {
	logger := klog.FromContext(ctx)
	es, ret := m.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("creating NVML event set: %w", ret)
	}
	handles := map[nvml.Device]int{}
	for _, g := range m.inv.GPUs {
		dev, ret := m.lib.DeviceGetHandleByIndex(g.Index)
		if ret != nvml.SUCCESS {
			logger.Error(ret, "Opening GPU for events", "index", g.Index)
			continue
		}
		handles[dev] = g.Index
		supported, ret := dev.GetSupportedEventTypes()
		if ret != nvml.SUCCESS || supported&nvml.EventTypeXidCriticalError == 0 {
			logger.Info("GPU does not report XID events; relying on probes", "index", g.Index, "result", ret)
			continue
		}
		if ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, es); ret != nvml.SUCCESS {
			logger.Error(ret, "Registering XID events; relying on probes", "index", g.Index)
		}
	}
	return handles, es, nil
}

func (m *Monitor) eventLoop(ctx context.Context, es nvml.EventSet, handles map[nvml.Device]int) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		ev, ret := es.Wait(uint32(m.opts.EventWait / time.Millisecond))
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_TIMEOUT:
			continue
		default:
			logger.Error(ret, "Waiting for NVML events")
			select {
			case <-ctx.Done():
			case <-m.clock.After(m.opts.EventWait):
			}
			continue
		}
		if ev.EventType != nvml.EventTypeXidCriticalError {
			continue
		}
		index, ok := handles[ev.Device]
		if !ok {
			logger.Info("XID event for an unknown GPU", "xid", ev.EventData)
			continue
		}
		logger.Info("GPU reported an XID", "index", index, "xid", ev.EventData, "application", gpu.IsApplicationXID(ev.EventData))
		m.recordXID(index, ev.EventData)
		m.evaluateAll(ctx)
	}
}

// RecordXID feeds an XID as if NVML had reported it (used by the event loop).
func (m *Monitor) recordXID(index int, xid uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := xidRecord{xid: xid, at: m.clock.Now()}
	if gpu.IsApplicationXID(xid) {
		m.application[index] = rec
	} else {
		m.critical[index] = rec
	}
}

// Refresh probes every GPU once, now. Discovery-only runs use it instead of Run.
func (m *Monitor) Refresh(ctx context.Context) { m.evaluateAll(ctx) }
