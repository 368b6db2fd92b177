//go:build benchscheduler

package scheduler

import (
	"bufio"
	"bytes"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the benchmark process has
// used so far: the in-process kube-apiserver, the controllers, the
// harness's clients and the scheduler together; etcd runs as a process of
// its own and is not in it. Both profiles run the same apiserver and
// harness work per pod, so the difference between them is the scheduler's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's VmHWM from /proc/self/status in bytes, 0 where
// it cannot be read. Like processCPU it covers the whole process: the
// apiserver's watch caches and the scheduler's informers, both holding
// every node, slice, claim and pod of the workload.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// resetPeakRSS returns the memory the previous workload freed to the
// kernel and restarts VmHWM at the process's current RSS (Linux's
// /proc/self/clear_refs "5"), so each workload's peak is its own. Where
// the kernel does not allow it the peak stays the process's peak so far.
func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
