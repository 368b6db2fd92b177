package gpu

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

var fakeStart = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParseFaultFile(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    map[int]uint64
		wantErr bool
	}{
		"empty":             {in: "", want: map[int]uint64{}},
		"two faults":        {in: "3 79\n# comment\n5 48 # ecc\n", want: map[int]uint64{3: 79, 5: 48}},
		"missing xid":       {in: "3\n", wantErr: true},
		"negative index":    {in: "-1 79\n", wantErr: true},
		"xid not a number":  {in: "1 lost\n", wantErr: true},
		"zero xid rejected": {in: "1 0\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseFaultFile([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMockFaults(t *testing.T) {
	clk := testingclock.NewFakeClock(fakeStart)
	m, err := NewMock("node-a", "l4x2", clk)
	if err != nil {
		t.Fatal(err)
	}
	if err := Init(m); err != nil {
		t.Fatal(err)
	}
	es, ret := m.EventSetCreate()
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if err := m.InjectXID(1, 79); err != nil {
		t.Fatal(err)
	}
	ev, ret := es.Wait(0)
	if ret != nvml.SUCCESS || ev.EventData != 79 || ev.Device != m.Devices[1] {
		t.Fatalf("Wait = %+v, %v", ev, ret)
	}
	if _, ret := m.Devices[1].GetMemoryInfo(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("lost GPU GetMemoryInfo = %v", ret)
	}
	if _, ret := m.Devices[0].GetMemoryInfo(); ret != nvml.SUCCESS {
		t.Errorf("healthy GPU GetMemoryInfo = %v", ret)
	}
	m.Recover(1)
	if _, ret := m.Devices[1].GetMemoryInfo(); ret != nvml.SUCCESS {
		t.Errorf("recovered GPU GetMemoryInfo = %v", ret)
	}
	if err := m.InjectXID(9, 79); err == nil {
		t.Error("InjectXID on a missing GPU succeeded")
	}
}

func TestWatchFaultFile(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clk := testingclock.NewFakeClock(fakeStart)
	m, err := NewMock("node-a", "l4x2", clk)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "faults")
	if err := os.WriteFile(path, []byte("0 48\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); m.WatchFaultFile(ctx, path, 100*time.Millisecond) }()
	waitFor(t, func() bool { return cmp.Equal(m.Faults(), map[int]uint64{0: 48}) })
	if n, _ := m.Devices[0].GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); n == 0 {
		t.Error("ECC fault did not raise the ECC counter")
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { clk.Step(100 * time.Millisecond); return len(m.Faults()) == 0 })
	cancel()
	<-done
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
