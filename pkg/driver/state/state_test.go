package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
)

func TestPrepareUnprepareIdempotent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	s := e.mustStart()
	claim := allocated("a", []string{"gpu-2", "gpu-5"})
	want := []kubeletplugin.Device{
		{Requests: []string{"gpu"}, PoolName: node, DeviceName: "gpu-2", CDIDeviceIDs: []string{"k8s.gpu.rota.dev/claim=uid-a-gpu-2"}},
		{Requests: []string{"gpu"}, PoolName: node, DeviceName: "gpu-5", CDIDeviceIDs: []string{"k8s.gpu.rota.dev/claim=uid-a-gpu-5"}},
	}
	for i := 0; i < 2; i++ {
		got, err := s.Prepare(ctx, claim)
		if err != nil {
			t.Fatalf("Prepare #%d: %v", i+1, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Prepare #%d (-want +got):\n%s", i+1, diff)
		}
	}
	if !e.cdiExists("uid-a") {
		t.Error("no CDI spec after prepare")
	}
	if c := s.Claims()["uid-a"]; c.State != checkpoint.PrepareCompleted || len(c.Devices) != 2 {
		t.Errorf("checkpoint claim = %+v", c)
	}
	// A lost CDI spec (tmpfs cleared) comes back on the next prepare.
	if err := os.RemoveAll(e.cdiDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(e.cdiDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prepare(ctx, claim); err != nil || !e.cdiExists("uid-a") {
		t.Errorf("re-prepare did not rebuild the CDI spec: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := s.Unprepare(ctx, "uid-a", "ns", "a"); err != nil {
			t.Fatalf("Unprepare #%d: %v", i+1, err)
		}
	}
	if e.cdiExists("uid-a") || len(s.Claims()) != 0 {
		t.Errorf("after unprepare: CDI %v, claims %v", e.cdiExists("uid-a"), s.Claims())
	}
	if calls := e.setter.Calls(); len(calls) != 0 {
		t.Errorf("exclusive claims changed time slices: %v", calls)
	}
}

func TestPrepareConflicts(t *testing.T) {
	cases := map[string]struct {
		first, second []claimOpt
		wantErr       string
	}{
		"two exclusive":               {wantErr: "already prepared exclusively for claim ns/first"},
		"exclusive after time-sliced": {first: []claimOpt{timeSliced("Long")}, wantErr: "an exclusive claim needs it alone"},
		"time-sliced after exclusive": {second: []claimOpt{timeSliced("Long")}, wantErr: "already prepared exclusively"},
		"time slices disagree":        {first: []claimOpt{timeSliced("Long")}, second: []claimOpt{timeSliced("Short")}, wantErr: "runs with time slice Long"},
		"time slices agree":           {first: []claimOpt{timeSliced("Long")}, second: []claimOpt{timeSliced("Long")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newEnv(t, "l4x2")
			s := e.mustStart()
			if _, err := s.Prepare(ctx, allocated("first", []string{"gpu-0"}, tc.first...)); err != nil {
				t.Fatal(err)
			}
			_, err := s.Prepare(ctx, allocated("second", []string{"gpu-0"}, tc.second...))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("second prepare: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("second prepare error = %v, want %q", err, tc.wantErr)
			}
			if _, ok := s.Claims()["uid-second"]; ok || e.cdiExists("uid-second") {
				t.Error("refused claim left state behind")
			}
		})
	}
}

func TestBadConfigFailsClearly(t *testing.T) {
	tests := map[string]struct {
		opts    []claimOpt
		devices []string
		wantErr string
	}{
		"unknown field": {
			opts:    []claimOpt{opaque(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"stratgy":"Exclusive"}}`, false)},
			wantErr: `unknown field "sharing.stratgy"`,
		},
		"bad strategy from class": {
			opts:    []claimOpt{opaque(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MIG"}}`, true)},
			wantErr: "config[0].opaque.parameters (from FromClass): invalid GpuConfig: sharing.strategy: Unsupported value",
		},
		"memory larger than the GPU": {
			opts:    []claimOpt{opaque(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","memoryMiB":30000}`, false)},
			wantErr: "memoryMiB 30000 exceeds the 23034 MiB of gpu-0 (NVIDIA L4)",
		},
		"device not on node": {devices: []string{"gpu-7"}, wantErr: `device "gpu-7" does not exist on node node-a`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newEnv(t, "l4x2")
			s := e.mustStart()
			devices := tc.devices
			if devices == nil {
				devices = []string{"gpu-0"}
			}
			_, err := s.Prepare(ctx, allocated("a", devices, tc.opts...))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Prepare error = %v, want it to contain %q", err, tc.wantErr)
			}
			if len(s.Claims()) != 0 || e.cdiExists("uid-a") {
				t.Error("failed prepare left state behind")
			}
		})
	}
}

func TestClaimConfigOverridesClass(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "l4x2")
	s := e.mustStart()
	claim := allocated("a", []string{"gpu-1"},
		opaque(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Short"}}}`, false, "gpu"),
		opaque(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Long"}}}`, true))
	if _, err := s.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if got := s.Claims()["uid-a"].Devices[0].TimeSlice; got != "Short" {
		t.Errorf("time slice = %s, want the claim's Short over the class's Long", got)
	}
}

func TestTimeSliceSetOnlyWhenDifferent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "l4x2")
	s := e.mustStart()
	uuid := e.inv.GPUs[0].UUID
	for _, name := range []string{"a", "b"} {
		if _, err := s.Prepare(ctx, allocated(name, []string{"gpu-0"}, timeSliced("Long"))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Prepare(ctx, allocated("c", []string{"gpu-1"}, timeSliced("Default"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Unprepare(ctx, "uid-a", "ns", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unprepare(ctx, "uid-b", "ns", "b"); err != nil {
		t.Fatal(err)
	}
	want := []timeslice.Call{{UUID: uuid, TimeSlice: gpuv1.LongTimeSlice}, {UUID: uuid, TimeSlice: gpuv1.DefaultTimeSlice}}
	if diff := cmp.Diff(want, e.setter.Calls()); diff != "" {
		t.Errorf("time-slice calls (-want +got):\n%s", diff)
	}
}

func TestTimeSliceFailureRollsBack(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "l4x2")
	e.setter.Err = errors.New("nvidia-smi: insufficient permissions")
	s := e.mustStart()
	_, err := s.Prepare(ctx, allocated("a", []string{"gpu-0"}, timeSliced("Long")))
	if err == nil || !strings.Contains(err.Error(), "insufficient permissions") {
		t.Fatalf("Prepare = %v", err)
	}
	if len(s.Claims()) != 0 || e.cdiExists("uid-a") {
		t.Error("failed prepare left state behind")
	}
	// The GPU's interval is unknown now: the next prepare sets it again.
	e.setter.Err = nil
	if _, err := s.Prepare(ctx, allocated("a", []string{"gpu-0"}, timeSliced("Long"))); err != nil {
		t.Fatal(err)
	}
	if n := len(e.setter.Calls()); n != 2 {
		t.Errorf("Set called %d times, want 2", n)
	}
}

func TestConcurrentExclusivePrepares(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "dgx-h100")
	s := e.mustStart()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Prepare(ctx, allocated(string(rune('a'+i)), []string{"gpu-4"}))
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !strings.Contains(err.Error(), "already prepared exclusively") {
			t.Errorf("unclear refusal: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d exclusive prepares on one GPU succeeded, want 1", ok, n)
	}
}

func TestRebootForgetsSettings(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "l4x2")
	s := e.mustStart()
	if _, err := s.Prepare(ctx, allocated("a", []string{"gpu-0"}, timeSliced("Long"))); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.cdiDir()); err != nil { // tmpfs after reboot
		t.Fatal(err)
	}
	e.bootID = "boot-2"
	s = e.mustStart()
	if !e.cdiExists("uid-a") {
		t.Error("CDI spec of a prepared claim not rebuilt after reboot")
	}
	// The kubelet prepares the claim again: the interval must be set again.
	if err := s.Unprepare(ctx, "uid-a", "ns", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prepare(ctx, allocated("a", []string{"gpu-0"}, timeSliced("Long"))); err != nil {
		t.Fatal(err)
	}
	if n := len(e.setter.Calls()); n != 2 {
		t.Errorf("Set called %d times, want 2 (once per boot)", n)
	}
}

func TestCorruptCheckpointRefusesToStart(t *testing.T) {
	e := newEnv(t, "l4x2")
	e.mustStart()
	path := filepath.Join(e.dir, "plugin", checkpoint.FileName)
	if err := os.WriteFile(path, []byte(`{"version":1,"checksum":"00","data":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := e.start()
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "To recover") {
		t.Fatalf("start with corrupt checkpoint = %v", err)
	}
}

// A plugin killed in the middle of a checkpoint write leaves its temporary
// file behind; the next start removes it and keeps the checkpoint.
func TestRestartRemovesTheTempFileOfAWriteThatDied(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "l4x2")
	s := e.mustStart()
	if _, err := s.Prepare(ctx, allocated("a", []string{"gpu-0"})); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, "plugin")
	stale := filepath.Join(dir, checkpoint.FileName+".tmp-123456")
	if err := os.WriteFile(stale, []byte(`{"version":1,"chec`), 0o600); err != nil {
		t.Fatal(err)
	}
	s = e.mustStart()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file still there after a restart: %v", err)
	}
	if c := s.Claims()["uid-a"]; c.State != checkpoint.PrepareCompleted {
		t.Errorf("claim after restart = %+v, want it prepared", c)
	}
	left, err := filepath.Glob(filepath.Join(dir, checkpoint.FileName+".tmp-*"))
	if err != nil || len(left) != 0 {
		t.Errorf("temporary files left: %v (%v)", left, err)
	}
}
