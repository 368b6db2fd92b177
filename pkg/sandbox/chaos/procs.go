package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// Component kinds, the report's rows.
const (
	KindScheduler  = "scheduler"
	KindController = "schedule-controller"
	KindDriver     = "dra-kubelet-plugin"
)

// proc is one component process: started from a built binary, killed with
// SIGKILL by the injector, started again after its downtime, and started
// again by itself when it exits on its own (a replica that lost its lease
// exits, as its Deployment would restart it).
type proc struct {
	name, kind string
	bin        string
	args       []string
	logPath    string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	started time.Time
	// down: killed by the injector and not to be restarted by the
	// supervisor; the injector starts it.
	down    bool
	stopped bool
	// starts counts every start after the first; selfExits the exits
	// nobody asked for.
	starts, selfExits int
}

func (p *proc) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked(ctx)
}

func (p *proc) startLocked(ctx context.Context) error {
	if p.stopped {
		return nil
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("%s: log file: %w", p.name, err)
	}
	fmt.Fprintf(logFile, "==== chaos: starting %s at %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The harness's death takes its components along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("%s: start %s: %w", p.name, p.bin, err)
	}
	if p.cmd != nil {
		p.starts++
	}
	p.cmd, p.started, p.down = cmd, time.Now(), false
	exited := make(chan struct{})
	p.exited = exited
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
		p.supervise(ctx, cmd)
	}()
	return nil
}

// supervise starts the process again when it exited by itself.
func (p *proc) supervise(ctx context.Context, cmd *exec.Cmd) {
	p.mu.Lock()
	if p.cmd != cmd || p.down || p.stopped || ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.selfExits++
	p.mu.Unlock()
	klog.FromContext(ctx).Info("Component exited by itself; starting it again", "component", p.name, "state", cmd.ProcessState.String())
	select {
	case <-ctx.Done():
		return
	case <-time.After(500 * time.Millisecond):
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == cmd && !p.down && !p.stopped {
		if err := p.startLocked(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Restarting a component")
		}
	}
}

// kill sends SIGKILL and waits until the process is gone. It reports false
// when the process was not running.
func (p *proc) kill() bool {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	running := cmd != nil && !p.down && exited != nil
	if running {
		select {
		case <-exited:
			running = false
		default:
		}
	}
	p.down = true
	p.mu.Unlock()
	if !running {
		return false
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	return true
}

// uptime is how long the current process has run; 0 when down.
func (p *proc) uptime() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || p.cmd == nil {
		return 0
	}
	select {
	case <-p.exited:
		return 0
	default:
	}
	return time.Since(p.started)
}

// stop kills the process for good.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.kill()
}

func (p *proc) counts() (starts, selfExits int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts, p.selfExits
}

func newProc(name, kind, bin, logDir string, args ...string) *proc {
	return &proc{name: name, kind: kind, bin: bin, args: args, logPath: filepath.Join(logDir, name+".log")}
}
