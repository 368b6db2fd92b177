package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// process is a child process with its output in a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// startProcess runs bin with args, its stdout and stderr appended to
// logDir/name.log, in a process group of its own.
func startProcess(ctx context.Context, logDir, name string, env []string, bin string, args ...string) (*process, error) {
	log, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Started", "process", name, "pid", cmd.Process.Pid, "log", log.Name())
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// exited says whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to grace, then SIGKILLs the group.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	p.kill()
	return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.name, grace)
}

// kill SIGKILLs the process group and waits for the process.
func (p *process) kill() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// waitForSocket waits until path exists as a socket, or the process exits.
func waitForSocket(ctx context.Context, p *process, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before its socket %s appeared (log: %s): %w", p.name, path, p.log.Name(), p.err)
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s: no socket %s after %s (log: %s)", p.name, path, timeout, p.log.Name()), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
