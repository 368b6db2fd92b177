package gpu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

func timeDurationMs(ms uint32) time.Duration { return time.Duration(ms) * time.Millisecond }

// InjectXID raises xid on GPU index: the event is delivered to every event set
// and, for XID 79, the GPU behaves as lost until Recover; for ECC XIDs its
// uncorrected ECC counter is non-zero until Recover.
func (m *Mock) InjectXID(index int, xid uint64) error {
	if index < 0 || index >= len(m.Devices) {
		return fmt.Errorf("no mock GPU with index %d (the node has %d)", index, len(m.Devices))
	}
	m.mu.Lock()
	m.faults[index] = xid
	m.mu.Unlock()
	ev := nvml.EventData{Device: m.Devices[index], EventType: nvml.EventTypeXidCriticalError, EventData: xid}
	select {
	case m.events <- ev:
	default:
		// The buffer only overflows when no monitor reads events; dropping is
		// what NVML does too, and the probe still sees the fault.
	}
	return nil
}

// Recover clears the fault on GPU index, as a GPU reset would.
func (m *Mock) Recover(index int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.faults, index)
}

// Faults returns the active faults, GPU index → XID.
func (m *Mock) Faults() map[int]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]uint64, len(m.faults))
	for k, v := range m.faults {
		out[k] = v
	}
	return out
}

// ParseFaultFile reads the control file format: one fault per line,
// "<gpu index> <xid>", '#' starts a comment. The file describes the faults
// that are active now; removing a line recovers that GPU.
func ParseFaultFile(data []byte) (map[int]uint64, error) {
	out := map[int]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"<gpu index> <xid>\", got %q", n, sc.Text())
		}
		idx, err := strconv.Atoi(fields[0])
		if err != nil || idx < 0 {
			return nil, fmt.Errorf("line %d: GPU index %q is not a non-negative integer", n, fields[0])
		}
		xid, err := strconv.ParseUint(fields[1], 10, 32)
		if err != nil || xid == 0 {
			return nil, fmt.Errorf("line %d: XID %q is not a positive integer", n, fields[1])
		}
		out[idx] = xid
	}
	return out, sc.Err()
}

// ApplyFaults makes the active faults equal to want: new or changed entries
// are injected, missing ones recovered.
func (m *Mock) ApplyFaults(want map[int]uint64) error {
	var errs []error
	for idx, xid := range want {
		if m.activeXID(idx) != xid {
			errs = append(errs, m.InjectXID(idx, xid))
		}
	}
	for idx := range m.Faults() {
		if _, ok := want[idx]; !ok {
			m.Recover(idx)
		}
	}
	return errors.Join(errs...)
}

// WatchFaultFile polls path every interval and applies its content until ctx
// ends. A missing file means no faults. A malformed file is logged and ignored,
// keeping the faults as they were.
func (m *Mock) WatchFaultFile(ctx context.Context, path string, interval time.Duration) {
	logger := klog.FromContext(ctx).WithValues("faultFile", path)
	ticker := m.clock.NewTicker(interval)
	defer ticker.Stop()
	var last []byte
	first := true
	for {
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			data, err = nil, nil
		case err != nil:
			logger.Error(err, "Reading fault file")
		}
		if err == nil && (first || !bytes.Equal(data, last)) {
			first, last = false, data
			if want, perr := ParseFaultFile(data); perr != nil {
				logger.Error(perr, "Ignoring malformed fault file")
			} else if aerr := m.ApplyFaults(want); aerr != nil {
				logger.Error(aerr, "Applying faults")
			} else {
				logger.Info("Mock faults applied", "faults", want)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}
