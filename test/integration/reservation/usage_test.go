package reservation

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/component-base/metrics"
	clocktesting "k8s.io/utils/clock/testing"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/poolreport"
	"github.com/rota-dev/rota/pkg/usage"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestUsageAccounting: a time-sliced reservation holds one H200 for team-a
// and two of its members share it; team-a also runs an ordinary pod on a
// second H200 and team-b one on a third. Over 90 minutes on the meter's
// clock, team-a is charged 1.5 reservation-hours and 3 GPU-hours (the
// reserved GPU once, its members adding nothing, plus the ordinary GPU),
// team-b 1.5 GPU-hours; `kubectl rota pool`'s tenant summary says the same
// of now.
func TestUsageAccounting(t *testing.T) {
	cp := setup(t)
	ctx := context.Background()
	createReservation(t, cp, timeSliced(tenant, "serving", 1, member("a", "md-a"), member("b", "md-b")))
	res := waitForReservation(t, cp, tenant, "serving", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound && len(r.Status.Devices) == 1
	})
	uuid := res.Status.Devices[0].UUID
	var pods []*v1.Pod
	for m, mem := range map[string]int64{"a": 40960, "b": 30720} {
		rs := cp.CreateDeployment(t, tenant, "md-"+m)
		cp.Create(t, framework.SharedGPUTemplate(tenant, "tmpl-"+m, mem, reservedToleration(tenant, "serving"), framework.UUIDSelector(uuid)))
		p := framework.ReplicaPod(rs, m+"-0", schedulerName, "tmpl-"+m)
		cp.Create(t, p)
		pods = append(pods, p)
	}
	cp.Create(t, framework.SharedGPUTemplate(tenant, "plain", 0, nil), framework.SharedGPUTemplate(outsiders, "plain", 0, nil))
	for _, p := range []*v1.Pod{framework.GPUPod(tenant, "plain", schedulerName, "plain"), framework.GPUPod(outsiders, "other", schedulerName, "plain")} {
		cp.Create(t, p)
		pods = append(pods, p)
	}
	for _, p := range pods {
		cp.WaitForPodBound(t, p.Namespace, p.Name)
	}

	// The meter as schedule-controller runs it, on a clock of the test's.
	clk := clocktesting.NewFakeClock(time.Date(2026, 10, 19, 8, 0, 0, 0, time.UTC))
	registry := metrics.NewKubeRegistry()
	meter := usage.NewMeter()
	if err := meter.Register(registry); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(cp.Dynamic, 0)
	runner := usage.NewRunner(meter, clk, time.Minute, factory, dynFactory.ForResource(rotav1.GPUReservationsResource))
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown(); dynFactory.Shutdown() })
	factory.Start(stop)
	dynFactory.Start(stop)
	factory.WaitForCacheSync(stop)
	dynFactory.WaitForCacheSync(stop)
	a, b := usage.Key{Namespace: tenant, Model: "H200"}, usage.Key{Namespace: outsiders, Model: "H200"}
	want := map[usage.Key]usage.Holding{a: {Reserved: 1, Charged: 2}, b: {Charged: 1}}
	framework.WaitFor(t, "the meter's informers to see every allocation", func(context.Context) (bool, string, error) {
		h, err := runner.Holdings()
		return cmp.Equal(want, h), cmp.Diff(want, h), err
	})
	meterFor(t, runner, clk, 90*time.Minute)
	for _, c := range []struct {
		metric, namespace string
		want              float64
	}{
		{"rota_usage_reservation_gpu_hours_total", tenant, 1.5},
		{"rota_usage_gpu_hours_total", tenant, 3},
		{"rota_usage_gpu_hours_total", outsiders, 1.5},
		{"rota_usage_reservation_gpu_hours_total", outsiders, 0},
	} {
		if got := counterValue(t, registry, c.metric, c.namespace, "H200"); got != c.want {
			t.Errorf("%s{namespace=%s,model=H200} = %v, want %v", c.metric, c.namespace, got, c.want)
		}
	}

	// kubectl rota pool's summary applies the same rule to what it reads.
	rows, err := poolreport.List(ctx, cp.Client, cp.Dynamic, gpuv1.DriverName)
	if err != nil {
		t.Fatal(err)
	}
	wantTenants := []poolreport.Tenant{{Key: a, Holding: want[a]}, {Key: b, Holding: want[b]}}
	if diff := cmp.Diff(wantTenants, poolreport.Tenants(rows)); diff != "" {
		t.Errorf("kubectl rota pool tenants (-want +got):\n%s", diff)
	}

	// The held GPU turns unhealthy: the reservation is Degraded and is no
	// longer charged for it. Its members still run on it (the taint is
	// NoSchedule), so team-a is charged that GPU as any other it uses.
	cp.SetDeviceTaints(t, node, res.Status.Devices[0].Device, framework.UnhealthyTaint)
	waitForReservation(t, cp, tenant, "serving", "Degraded", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationDegraded
	})
	degraded := map[usage.Key]usage.Holding{a: {Charged: 2}, b: {Charged: 1}}
	framework.WaitFor(t, "the meter to see the reservation Degraded", func(context.Context) (bool, string, error) {
		h, err := runner.Holdings()
		return cmp.Equal(degraded, h), cmp.Diff(degraded, h), err
	})
	meterFor(t, runner, clk, 30*time.Minute)
	for _, c := range []struct {
		metric string
		want   float64
	}{
		{"rota_usage_reservation_gpu_hours_total", 1.5}, // not a minute more while Degraded
		{"rota_usage_gpu_hours_total", 4},               // 3, plus 2 GPUs its pods use for half an hour
	} {
		if got := counterValue(t, registry, c.metric, tenant, "H200"); got != c.want {
			t.Errorf("Degraded: %s{namespace=%s,model=H200} = %v, want %v", c.metric, tenant, got, c.want)
		}
	}
	framework.WaitFor(t, "kubectl rota pool to charge the Degraded reservation nothing", func(ctx context.Context) (bool, string, error) {
		rows, err := poolreport.List(ctx, cp.Client, cp.Dynamic, gpuv1.DriverName)
		if err != nil {
			return false, "", err
		}
		want := []poolreport.Tenant{{Key: a, Holding: degraded[a]}, {Key: b, Holding: degraded[b]}}
		got := poolreport.Tenants(rows)
		return cmp.Equal(want, got), cmp.Diff(want, got), nil
	})
}

// meterFor has the runner charge what it sees now for d of clk's time: an
// observation, d later another.
func meterFor(t *testing.T, runner *usage.Runner, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	if err := runner.ObserveNow(); err != nil {
		t.Fatal(err)
	}
	clk.Step(d)
	if err := runner.ObserveNow(); err != nil {
		t.Fatal(err)
	}
}

// counterValue reads a counter with namespace and model labels from
// registry (0 when absent).
func counterValue(t *testing.T, registry metrics.KubeRegistry, name, namespace, model string) float64 {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == namespace && labels["model"] == model {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
