package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// pluginProcess is the dra-kubelet-plugin binary running as its own
// process for a gpuNode started with external set, as the DaemonSet runs it.
type pluginProcess struct {
	cmd *exec.Cmd
	// exited receives the process's exit status once; whoever takes it
	// puts it back for the others (the cleanup).
	exited chan error
	logs   *bytes.Buffer
	// metricsAddr is where /metrics listens; "" when off.
	metricsAddr string
}

// startPluginProcess runs the plugin binary for n with n's directories and
// profile, against the test's API server, and waits until it answers the
// kubelet's registration and has published its slice of devices GPUs.
// metricsAddr is passed as --metrics-address ("" disables /metrics); extra
// flags follow the others. The process is killed when the test ends.
func startPluginProcess(t testing.TB, n *gpuNode, devices int, metricsAddr string, extra ...string) *pluginProcess {
	t.Helper()
	if !n.external {
		t.Fatal("startPluginProcess needs a gpuNode started with external set")
	}
	args := append([]string{"--node-name", n.name, "--mock-profile", n.opts.MockProfile, "--kubeconfig", n.cp.Kubeconfig,
		"--cdi-root", n.opts.CDIRoot, "--plugin-data-dir", n.opts.PluginDataDir, "--registrar-dir", n.opts.RegistrarDir,
		"--boot-id-file", n.opts.BootIDFile, "--http-address", "", "--metrics-address", metricsAddr}, extra...)
	p := &pluginProcess{cmd: exec.Command(framework.Binary(t, "dra-kubelet-plugin"), args...), exited: make(chan error, 1),
		logs: &bytes.Buffer{}, metricsAddr: metricsAddr}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		err := <-p.exited // "signal: killed" if it was still running
		if t.Failed() {
			t.Logf("plugin exit: %v; output:\n%s", err, p.logs.String())
		}
	})
	framework.WaitFor(t, "the plugin binary to register", func(ctx context.Context) (bool, string, error) {
		info, err := n.getInfo(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return info.Name == gpuv1.DriverName, info.String(), nil
	})
	framework.WaitFor(t, "the plugin binary to publish its slice", func(ctx context.Context) (bool, string, error) {
		s, err := n.slice(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(s.Spec.Devices) == devices, fmt.Sprintf("%d devices", len(s.Spec.Devices)), nil
	})
	time.Sleep(time.Second) // the first publish returns after informer sync, polled about every second
	return p
}

// checkRunning fails the test at once if the process has exited.
func (p *pluginProcess) checkRunning(t testing.TB) {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		t.Fatalf("plugin process %d exited: %v", p.cmd.Process.Pid, err)
	default:
	}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// Linux (getconf CLK_TCK), whatever the kernel's own tick rate.
const clockTicks = 100

// cpu is the process's CPU time so far, user and system, from
// /proc/<pid>/stat: in steps of 1/clockTicks s (10 ms).
func (p *pluginProcess) cpu(t testing.TB) time.Duration {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		p.checkRunning(t)
		t.Fatalf("plugin process CPU: %v", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start with the state (field 3); utime and stime
	// are fields 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || len(bytes.Fields(stat[i+1:])) < 13 {
		t.Fatalf("plugin process CPU: unexpected /proc stat %q", stat)
	}
	fields := bytes.Fields(stat[i+1:])
	var ticks int64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			t.Fatalf("plugin process CPU: /proc stat field %q: %v", f, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// counter reads one counter (summed over its series) from the process's
// /metrics.
func (p *pluginProcess) counter(t testing.TB, name string) float64 {
	t.Helper()
	p.checkRunning(t)
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		p.checkRunning(t)
		t.Fatalf("plugin process /metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("plugin process /metrics: %v", err)
	}
	f, ok := families[name]
	if !ok {
		t.Fatalf("plugin process /metrics has no %s", name)
	}
	var sum float64
	for _, m := range f.GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// freeLocalAddr is a localhost address with a port free right now, for a
// process's listener whose address the test must know.
func freeLocalAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
