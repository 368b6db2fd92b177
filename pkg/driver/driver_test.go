package driver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/gpu/gputest"
	"github.com/rota-dev/rota/pkg/driver/health"
	"github.com/rota-dev/rota/pkg/driver/state"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
)

type fixture struct {
	driver *Driver
	mock   *gpu.Mock
	mon    *health.Monitor
	clock  *testingclock.FakeClock
}

func newFixture(t *testing.T) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	m, inv := gputest.Inventory(t, "node-a", "l4x2", clk)
	dir := t.TempDir()
	store, _ := checkpoint.NewStore(filepath.Join(dir, "p"))
	w, _ := cdi.NewWriter(filepath.Join(dir, "cdi"))
	st, err := state.New(ctx, state.Options{NodeName: "node-a", Inventory: &inv, Store: store, CDI: w, TimeSlicer: &timeslice.Recorder{}, BootID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	mon := health.NewMonitor(m, &inv, clk, health.Options{XIDHoldTime: -1})
	d := New(Config{NodeName: "node-a", Inventory: &inv, State: st, Monitor: mon, Metrics: NewMetrics(), Clock: clk})
	return &fixture{driver: d, mock: m, mon: mon, clock: clk}
}

func claim(name, device string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: gpuv1.DriverName, Pool: "node-a", Device: device}},
		}}},
	}
}

func TestPrepareResourceClaimsFailsPerClaim(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	good, dup, missing := claim("good", "gpu-0"), claim("dup", "gpu-0"), claim("missing", "gpu-9")
	res, err := f.driver.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{good, dup, missing})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[good.UID]; r.Err != nil || len(r.Devices) != 1 {
		t.Errorf("good claim: %+v", r)
	}
	for c, want := range map[*resourceapi.ResourceClaim]string{dup: "already prepared exclusively", missing: `device "gpu-9" does not exist`} {
		if r := res[c.UID]; r.Err == nil || !strings.Contains(r.Err.Error(), want) {
			t.Errorf("%s: err %v, want %q", c.Name, r.Err, want)
		}
	}
	un, err := f.driver.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "good"}, UID: good.UID}})
	if err != nil || un[good.UID] != nil {
		t.Errorf("unprepare: %v %v", err, un)
	}

	for _, name := range []string{"rota_driver_prepare_duration_seconds", "rota_driver_unprepare_duration_seconds"} {
		mfs, err := f.driver.cfg.Metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() == name {
				found = true
			}
		}
		if !found {
			t.Errorf("metric %s not registered/observed", name)
		}
	}
	if n, err := testutil.GetHistogramMetricCount(f.driver.cfg.Metrics.prepareDuration.WithLabelValues("error")); err != nil || n != 2 {
		t.Errorf("failed prepares observed = %d (%v), want 2", n, err)
	}
}

func TestHealthReportAndDeviceMetrics(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newFixture(t)
	reports := make(chan kubeletplugin.DeviceHealthReport)
	done := make(chan error)
	go func() { done <- f.driver.WatchHealthStatus(ctx, reports) }()

	first := <-reports
	var got []kubeletplugin.HealthStatus
	for _, d := range first.Devices {
		got = append(got, d.Health)
	}
	if diff := cmp.Diff([]kubeletplugin.HealthStatus{"Healthy", "Healthy"}, got); diff != "" {
		t.Errorf("initial report (-want +got):\n%s", diff)
	}

	if err := f.mock.InjectXID(1, 79); err != nil {
		t.Fatal(err)
	}
	f.mon.Refresh(ctx)
	second := <-reports
	if d := second.Devices[1]; d.Health != kubeletplugin.HealthStatusUnhealthy || d.DeviceName != "gpu-1" || !strings.Contains(d.Message, "fallen off the bus") {
		t.Errorf("report after fault: %+v", d)
	}
	f.driver.cfg.Metrics.setDevices(f.mon.Statuses())
	for state, want := range map[string]float64{"Healthy": 1, "Unhealthy": 1, "Degraded": 0} {
		if v, err := testutil.GetGaugeMetricValue(f.driver.cfg.Metrics.devices.WithLabelValues(state)); err != nil || v != want {
			t.Errorf("devices{health=%s} = %v (%v), want %v", state, v, err, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchHealthStatus returned %v", err)
	}
}
