package health

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/driver/gpu"
)

// evaluateAll recomputes every GPU's health and notifies subscribers when
// anything changed.
func (m *Monitor) evaluateAll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	probes := make(map[int]Status, len(m.inv.GPUs))
	for _, g := range m.inv.GPUs {
		probes[g.Index] = m.probe(g) // NVML calls happen outside the lock
	}
	m.mu.Lock()
	changed := false
	now := m.clock.Now()
	for _, g := range m.inv.GPUs {
		st := probes[g.Index]
		if st.State == Healthy {
			if rec, ok := m.critical[g.Index]; ok && now.Sub(rec.at) < m.opts.XIDHoldTime {
				st = Status{State: Unhealthy, Reason: fmt.Sprintf("xid-%d", rec.xid),
					Message: fmt.Sprintf("critical XID %d at %s", rec.xid, rec.at.UTC().Format("15:04:05"))}
			} else if rec, ok := m.application[g.Index]; ok && now.Sub(rec.at) < m.opts.XIDHoldTime {
				st = Status{State: Degraded, Reason: fmt.Sprintf("xid-%d", rec.xid),
					Message: fmt.Sprintf("application XID %d at %s", rec.xid, rec.at.UTC().Format("15:04:05"))}
			}
		}
		if old := m.statuses[g.Index]; old != st {
			logger.Info("GPU health changed", "index", g.Index, "uuid", g.UUID, "from", old.State, "to", st.State, "reason", st.Reason)
			m.statuses[g.Index] = st
			changed = true
		}
	}
	var subs []chan struct{}
	if changed {
		for ch := range m.subscribers {
			subs = append(subs, ch)
		}
	}
	m.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// probe checks that the GPU can still be opened and read, and that its
// uncorrected ECC errors stay within the threshold.
func (m *Monitor) probe(g gpu.GPU) Status {
	dev, ret := m.lib.DeviceGetHandleByUUID(g.UUID)
	if ret != nvml.SUCCESS {
		return lost(ret, "cannot open GPU")
	}
	if _, ret := dev.GetMemoryInfo(); ret != nvml.SUCCESS {
		return lost(ret, "cannot read GPU memory info")
	}
	n, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	if ret == nvml.SUCCESS && n > m.opts.ECCThreshold {
		return Status{State: Unhealthy, Reason: "ecc", Message: fmt.Sprintf("%d uncorrected ECC errors since boot (threshold %d)", n, m.opts.ECCThreshold)}
	}
	return Status{State: Healthy}
}

func lost(ret nvml.Return, what string) Status {
	if ret == nvml.ERROR_GPU_IS_LOST {
		return Status{State: Unhealthy, Reason: "gpu-lost", Message: what + ": GPU has fallen off the bus"}
	}
	return Status{State: Unhealthy, Reason: "unreachable", Message: fmt.Sprintf("%s: %v", what, ret)}
}
