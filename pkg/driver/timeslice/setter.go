// Package timeslice changes a GPU's time-slice interval. It is the only place
// the driver changes a GPU's own settings, behind one small interface so that
// tests record calls instead of running nvidia-smi.
package timeslice

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"time"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Setter applies a time-slice interval to the GPU with the given UUID.
type Setter interface {
	Set(ctx context.Context, uuid string, ts gpuv1.TimeSlice) error
}

// NvidiaSMI runs nvidia-smi: the compute mode goes back to DEFAULT (shared),
// then compute-policy sets the interval (0 Default … 3 Long). NVML has no call
// for this.
type NvidiaSMI struct {
	// Path to nvidia-smi; "nvidia-smi" on PATH when empty.
	Path string
}

// Set implements Setter.
func (n NvidiaSMI) Set(ctx context.Context, uuid string, ts gpuv1.TimeSlice) error {
	bin := n.Path
	if bin == "" {
		bin = "nvidia-smi"
	}
	for _, args := range [][]string{
		{"-i", uuid, "-c", "DEFAULT"},
		{"compute-policy", "-i", uuid, "--set-timeslice", strconv.Itoa(ts.NvidiaSMIValue())},
	} {
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v: %w: %s", bin, args, err, out)
		}
	}
	return nil
}

// Call is one recorded Set.
type Call struct {
	UUID      string
	TimeSlice gpuv1.TimeSlice
}

// Recorder is the fake: it records calls and can be told to fail.
type Recorder struct {
	mu    sync.Mutex
	calls []Call
	// Err, when set, is returned by every Set (after recording).
	Err error
	// Delay is how long each Set takes (or until its context ends).
	Delay time.Duration
}

// Set implements Setter.
func (r *Recorder) Set(ctx context.Context, uuid string, ts gpuv1.TimeSlice) error {
	if r.Delay > 0 {
		select {
		case <-time.After(r.Delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, Call{UUID: uuid, TimeSlice: ts})
	return r.Err
}

// Calls returns a copy of the recorded calls.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}
