package health

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/gpu/gputest"
)

func TestMonitorFaultsAndRecovery(t *testing.T) {
	type step struct {
		do   func(m *gpu.Mock, clk *testingclock.FakeClock)
		want Status // of GPU 1
	}
	inject := func(xid uint64) func(*gpu.Mock, *testingclock.FakeClock) {
		return func(m *gpu.Mock, _ *testingclock.FakeClock) { _ = m.InjectXID(1, xid) }
	}
	recoverGPU := func(m *gpu.Mock, _ *testingclock.FakeClock) { m.Recover(1) }
	wait := func(d time.Duration) func(*gpu.Mock, *testingclock.FakeClock) {
		return func(_ *gpu.Mock, clk *testingclock.FakeClock) { clk.Step(d) }
	}
	healthy := Status{State: Healthy}
	tests := map[string][]step{
		"GPU lost, then recovered after the hold time": {
			{do: inject(79), want: Status{State: Unhealthy, Reason: "gpu-lost", Message: "cannot read GPU memory info: GPU has fallen off the bus"}},
			{do: recoverGPU},
			{do: wait(time.Second), want: Status{State: Unhealthy, Reason: "xid-79", Message: "critical XID 79 at 12:00:00"}},
			{do: wait(time.Minute), want: healthy},
		},
		"ECC error": {
			{do: inject(48), want: Status{State: Unhealthy, Reason: "ecc", Message: "1 uncorrected ECC errors since boot (threshold 0)"}},
			{do: recoverGPU},
			{do: wait(61 * time.Second), want: healthy},
		},
		"application XID is informational": {
			{do: inject(13), want: Status{State: Degraded, Reason: "xid-13", Message: "application XID 13 at 12:00:00"}},
			{do: wait(61 * time.Second), want: healthy},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			m, inv := gputest.Inventory(t, "node-a", "l4x2", clk)
			mon := NewMonitor(m, &inv, clk, Options{ProbeInterval: time.Second, XIDHoldTime: time.Minute})
			done := make(chan error)
			go func() { done <- mon.Run(ctx) }()
			defer func() {
				cancel()
				clk.Step(time.Second) // release a pending event wait
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			// Let Run register its ticker before the clock moves.
			waitUntil(t, func() bool { return clk.HasWaiters() })
			for i, s := range steps {
				s.do(m, clk)
				if s.want == (Status{}) {
					continue
				}
				waitUntil(t, func() bool { return mon.Statuses()[1] == s.want })
				if diff := cmp.Diff(Status{State: Healthy}, mon.Statuses()[0]); diff != "" {
					t.Errorf("step %d: GPU 0 (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestSubscribeNotifiesOnChange(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	m, _ := gpu.NewMock("node-a", "l4x2", clk)
	_ = gpu.Init(m)
	inv, _ := gpu.Discover(m)
	mon := NewMonitor(m, &inv, clk, Options{ProbeInterval: time.Second})
	ch, stop := mon.Subscribe()
	defer stop()
	done := make(chan error)
	go func() { done <- mon.Run(ctx) }()
	waitUntil(t, func() bool { return clk.HasWaiters() })
	_ = m.InjectXID(0, 79)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after a fault")
	}
	cancel()
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Error(err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
