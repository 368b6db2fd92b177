package timeslice

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// fakeSMI writes a shell script that logs its arguments and exits with code.
func fakeSMI(t *testing.T, code int) (bin, log string) {
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "nvidia-smi"), filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + log + "\necho 'fake nvidia-smi output'\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

func TestNvidiaSMISet(t *testing.T) {
	tests := map[string]struct {
		ts   gpuv1.TimeSlice
		want []string
	}{
		"long":    {ts: gpuv1.LongTimeSlice, want: []string{"-i GPU-1 -c DEFAULT", "compute-policy -i GPU-1 --set-timeslice 3"}},
		"default": {ts: gpuv1.DefaultTimeSlice, want: []string{"-i GPU-1 -c DEFAULT", "compute-policy -i GPU-1 --set-timeslice 0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			bin, log := fakeSMI(t, 0)
			if err := (NvidiaSMI{Path: bin}).Set(ctx, "GPU-1", tc.ts); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, strings.Split(strings.TrimSpace(string(data)), "\n")); diff != "" {
				t.Errorf("nvidia-smi calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNvidiaSMIFailureSaysWhy(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	bin, _ := fakeSMI(t, 3)
	err := (NvidiaSMI{Path: bin}).Set(ctx, "GPU-1", gpuv1.ShortTimeSlice)
	if err == nil || !strings.Contains(err.Error(), "fake nvidia-smi output") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Set = %v, want the command's output and status", err)
	}
}

// A Recorder with a Delay takes that long to set a slice, and gives up
// when its context ends first, recording nothing.
func TestRecorderDelay(t *testing.T) {
	r := &Recorder{Delay: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Set(ctx, "GPU-1", gpuv1.DefaultTimeSlice); !errors.Is(err, context.Canceled) {
		t.Errorf("Set with a cancelled context = %v, want context.Canceled", err)
	}
	if len(r.Calls()) != 0 {
		t.Errorf("calls %v recorded for a Set that gave up", r.Calls())
	}
	r.Delay = time.Millisecond
	if err := r.Set(context.Background(), "GPU-1", gpuv1.DefaultTimeSlice); err != nil || len(r.Calls()) != 1 {
		t.Errorf("Set = %v with calls %v, want one recorded call", err, r.Calls())
	}
}
