package controller

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// BenchmarkPass2000Schedules measures one controller pass over 2,000
// DeploySchedules in steady state (every target converged, nothing to
// submit), against fake clients, with the schedule informer running as in
// production. Each schedule is docs/schedule.md's two-target example in its own
// namespace-sized slice of names, driving its own two Deployments.
func BenchmarkPass2000Schedules(b *testing.B) {
	const n = 2000
	var objs []runtime.Object
	objs = append(objs, deviceClass(), node("gpu-node"), gpuSlice("gpu-node", 10))
	objs = append(objs, claimTemplate("gpu8", 8), claimTemplate("gpu6", 6))
	for i := range n {
		objs = append(objs,
			deployment(fmt.Sprintf("llama-%d", i), 0, "gpu8", nil),
			deployment(fmt.Sprintf("qwen-%d", i), 1, "gpu6", nil))
	}
	e := newEnv(b, at(19, 7, 0), objs...)
	e.ctrl.opts.Recorder = &record.FakeRecorder{} // drops events
	names := make([]string, n)
	for i := range n {
		ds := weekSchedule()
		ds.Name, ds.UID = fmt.Sprintf("pool-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
		ds.Spec.Targets[0].WorkloadRef.Name = fmt.Sprintf("llama-%d", i)
		ds.Spec.Targets[1].WorkloadRef.Name = fmt.Sprintf("qwen-%d", i)
		names[i] = ds.Name
		e.addScheduleB(b, ds)
	}
	ctx := e.ctx
	// The fake dynamic client's watch cannot replay 2,000 objects (its
	// channel holds 100), so the informer lists through the fake and gets a
	// silent watch.
	e.dyn.PrependWatchReactor(v1alpha1.DeploySchedulesResource.Resource, func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	factory := dynamicinformer.NewDynamicSharedInformerFactory(e.dyn, 0)
	if err := e.ctrl.watch(factory); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), e.ctrl.informer.HasSynced) {
		b.Fatal("informer not synced")
	}
	// First pass writes each schedule's status; the benchmark measures the
	// steady state after it.
	for _, name := range names {
		if _, err := e.ctrl.Reconcile(ctx, ns, name); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range names[:3] {
		ds, err := e.ctrl.schedules.get(ctx, ns, name)
		if err != nil || ds.Status.ConvergedCount != 2 {
			b.Fatalf("schedule %s not converged before the benchmark: %v %+v", name, err, ds.Status)
		}
	}
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		for _, name := range names {
			if _, err := e.ctrl.Reconcile(ctx, ns, name); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n), "schedules/op")
	// CPU time (user and system) per pass: wall time on a shared machine
	// counts the other builds too.
	b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
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
