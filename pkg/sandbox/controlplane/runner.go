package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/klog/v2"
)

// runner is what kube-apiserver's test server start-up needs from a
// testing.TB, for a process that is not a test: it logs to a logger, keeps
// cleanups for Stop and turns Fatal into an error returned by Start.
type runner struct {
	ctx    context.Context
	logger klog.Logger
	dir    string

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	temp     int
}

// fatal is the panic value of runner.FailNow; Start recovers it.
type fatal struct{ msg string }

func newRunner(ctx context.Context, logger klog.Logger, dir string) *runner {
	return &runner{ctx: ctx, logger: logger, dir: dir}
}

func (r *runner) Attr(key, value string)   {}
func (r *runner) Chdir(string)             { r.Fatal("Chdir is not supported outside tests") }
func (r *runner) Context() context.Context { return r.ctx }
func (r *runner) Helper()                  {}
func (r *runner) Name() string             { return "rota-sandbox" }
func (r *runner) Setenv(key, value string) {
	if err := os.Setenv(key, value); err != nil {
		r.Fatalf("setenv %s: %v", key, err)
	}
}

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// runCleanups calls the registered cleanups, last first.
func (r *runner) runCleanups() {
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		f()
	}
}

func (r *runner) Log(args ...any)                 { r.logger.V(4).Info(fmt.Sprint(args...)) }
func (r *runner) Logf(format string, args ...any) { r.logger.V(4).Info(fmt.Sprintf(format, args...)) }
func (r *runner) Error(args ...any)               { r.Fail(); r.logger.Error(nil, fmt.Sprint(args...)) }
func (r *runner) Errorf(format string, args ...any) {
	r.Fail()
	r.logger.Error(nil, fmt.Sprintf(format, args...))
}
func (r *runner) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *runner) FailNow()          { r.Fail(); panic(fatal{msg: "FailNow"}) }
func (r *runner) Fatal(args ...any) { r.Fail(); panic(fatal{msg: fmt.Sprint(args...)}) }
func (r *runner) Fatalf(format string, args ...any) {
	r.Fail()
	panic(fatal{msg: fmt.Sprintf(format, args...)})
}
func (r *runner) Skip(args ...any)                 { r.Fatal(args...) }
func (r *runner) Skipf(format string, args ...any) { r.Fatalf(format, args...) }
func (r *runner) SkipNow()                         { r.FailNow() }
func (r *runner) Skipped() bool                    { return false }

// TempDir returns a new directory under the runner's directory.
func (r *runner) TempDir() string {
	r.mu.Lock()
	r.temp++
	dir := filepath.Join(r.dir, fmt.Sprintf("tmp-%d", r.temp))
	r.mu.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.Fatalf("temp dir: %v", err)
	}
	return dir
}
