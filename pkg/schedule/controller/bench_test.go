package controller

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// BenchmarkPass2000Schedules measures one controller pass over 2,000
// DeploySchedules against fake clients, with the schedule, Deployment and
// StatefulSet informers running as in production. Each schedule is docs/schedule.md's two-target example
// in its own namespace-sized slice of names, driving its own two
// Deployments; every target is converged. Sub-benchmarks:
//   - steady-state: the pass that repeats every pass period, the forecast
//     cached;
//   - forecast-recomputed: the pass after the forecast was forgotten (a
//     schedule's spec changed, or the forecast period lapsed): the first
//     schedule of the pass reads the cluster and computes the forecast.
func BenchmarkPass2000Schedules(b *testing.B) {
	benchmarkPasses(b, 2000)
}

// BenchmarkPassCurve is BenchmarkPass2000Schedules at several sizes: how a
// pass grows with the number of schedules.
func BenchmarkPassCurve(b *testing.B) {
	for _, n := range []int{250, 500, 1000, 2000, 4000} {
		b.Run(fmt.Sprintf("schedules=%d", n), func(b *testing.B) { benchmarkPasses(b, n) })
	}
}

func benchmarkPasses(b *testing.B, n int) {
	e, names := passEnv(b, n)
	pass := func(b *testing.B) {
		for _, name := range names {
			if _, err := e.ctrl.Reconcile(e.ctx, ns, name); err != nil {
				b.Fatal(err)
			}
		}
	}
	requests := func() int { return len(e.client.Actions()) + len(e.dyn.Actions()) }
	report := func(b *testing.B, cpu time.Duration, reqs int) {
		b.ReportMetric(float64(n), "schedules/op")
		// API requests per pass over every schedule (the fake clients
		// record each; the informers' list and watch came before).
		b.ReportMetric(float64(requests()-reqs)/float64(b.N), "requests/op")
		// CPU time (user and system) per pass: wall time on a shared
		// machine counts the other builds too.
		b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}
	b.Run("steady-state", func(b *testing.B) {
		b.ReportAllocs()
		cpu, reqs := cpuTime(), requests()
		for b.Loop() {
			pass(b)
		}
		report(b, cpu, reqs)
	})
	b.Run("forecast-recomputed", func(b *testing.B) {
		b.ReportAllocs()
		cpu, reqs := cpuTime(), requests()
		for b.Loop() {
			e.ctrl.forecasts.forget()
			pass(b)
		}
		report(b, cpu, reqs)
	})
}

// BenchmarkForecastAfterStatusWrites measures one capacity forecast over
// 2,000 schedules when every schedule's status was written since the
// previous forecast (a new resourceVersion each, the same generation), as
// when every pass changed a condition: what the forecast decodes and
// validates again of schedules whose spec did not change.
func BenchmarkForecastAfterStatusWrites(b *testing.B) {
	e, _ := passEnv(b, 2000)
	store := e.ctrl.informer.GetStore()
	// Two resourceVersions of every schedule, stored in turn.
	var versions [2][]*unstructured.Unstructured
	for _, obj := range store.List() {
		u := obj.(*unstructured.Unstructured)
		for i := range versions {
			c := u.DeepCopy()
			c.SetResourceVersion(fmt.Sprintf("%s-%d", u.GetResourceVersion(), i))
			versions[i] = append(versions[i], c)
		}
	}
	b.ReportAllocs()
	cpu, turn := cpuTime(), 0
	for b.Loop() {
		for _, u := range versions[turn%2] {
			if err := store.Update(u); err != nil {
				b.Fatal(err)
			}
		}
		turn++
		e.ctrl.forecasts.forget()
		if _, err := e.ctrl.forecasts.get(e.ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// passEnv is n converged schedules behind a synced informer, after the
// first pass (which wrote each schedule's status).
func passEnv(b *testing.B, n int) (*env, []string) {
	var objs []runtime.Object
	objs = append(objs, deviceClass(), node("gpu-node"), gpuSlice("gpu-node", 10))
	objs = append(objs, claimTemplate("gpu8", 8), claimTemplate("gpu6", 6))
	for i := range n {
		objs = append(objs,
			deployment(fmt.Sprintf("llama-%d", i), 0, "gpu8", nil),
			deployment(fmt.Sprintf("qwen-%d", i), 1, "gpu6", nil))
	}
	e := newEnv(b, at(19, 7, 0), objs...)
	e.recorder = &record.FakeRecorder{} // drops events
	// Status writes get new resourceVersions, as on an API server.
	e.casSchedules()
	names := make([]string, n)
	for i := range n {
		ds := weekSchedule()
		ds.Name, ds.UID = fmt.Sprintf("pool-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
		// The fake client stores no resourceVersion; an API server gives
		// every object one, and the status writes compare and swap on it.
		ds.ResourceVersion = strconv.Itoa(i + 1)
		ds.Spec.Targets[0].WorkloadRef.Name = fmt.Sprintf("llama-%d", i)
		ds.Spec.Targets[1].WorkloadRef.Name = fmt.Sprintf("qwen-%d", i)
		names[i] = ds.Name
		e.addScheduleB(b, ds)
	}
	ctx := e.ctx
	// The fake dynamic client's watch cannot replay 2,000 objects (its
	// channel holds 100), so the informer lists through the fake and gets a
	// silent watch; after the first pass the test copies the schedules
	// into its cache, as the watch would.
	e.dyn.PrependWatchReactor(v1alpha1.DeploySchedulesResource.Resource, func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	// The workloads are read from informers fed by the fake clientset, as
	// the binary reads them (list, then watch).
	e.startCaches(b)
	// The first pass writes each schedule's status; the passes measured
	// come after it.
	for _, name := range names {
		if _, err := e.ctrl.Reconcile(ctx, ns, name); err != nil {
			b.Fatal(err)
		}
	}
	if n := e.workloadWrites(); n != 0 {
		b.Fatalf("the first pass wrote %d workloads; the benchmark wants them converged", n)
	}
	list, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		u := &list.Items[i]
		if err := e.ctrl.informer.GetStore().Update(u); err != nil {
			b.Fatal(err)
		}
		if i < 3 {
			var ds v1alpha1.DeploySchedule
			if err := fromUnstructured(u, &ds); err != nil || ds.Status.ConvergedCount != 2 {
				b.Fatalf("schedule %s not converged before the benchmark: %v %+v", u.GetName(), err, ds.Status)
			}
		}
	}
	// The status writes gave every schedule a new resourceVersion (the
	// same generation): one forecast now, as in a cluster whose schedules
	// are converged, so that the passes measured start from one.
	e.ctrl.forecasts.forget()
	if _, err := e.ctrl.Reconcile(ctx, ns, names[0]); err != nil {
		b.Fatal(err)
	}
	// A converged pass makes no request: the schedule, the gate and the
	// workloads all come from caches.
	before := len(e.client.Actions()) + len(e.dyn.Actions())
	if _, err := e.ctrl.Reconcile(ctx, ns, names[1]); err != nil {
		b.Fatal(err)
	}
	if got := len(e.client.Actions()) + len(e.dyn.Actions()) - before; got != 0 {
		b.Fatalf("a converged pass made %d requests, want 0", got)
	}
	return e, names
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (e *env) addScheduleB(b *testing.B, ds *v1alpha1.DeploySchedule) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ds.Namespace).Create(e.ctx, unstructuredOf(obj), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}
