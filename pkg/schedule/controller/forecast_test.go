package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// forecastPool is poolObjects with the pods that hold the claims, as the
// forecast tells the pods of targets from the pods no schedule touches by
// the claims' reservedFor.
func forecastPool() []runtime.Object {
	objs := []runtime.Object{deviceClass(), node("gpu-node"), gpuSlice("gpu-node", 10),
		claimTemplate("gpu8", 8), claimTemplate("gpu6", 6), claimTemplate("gpu4", 4),
		deployment("md-llama70b", 0, "gpu8", nil), deployment("md-qwen32b", 1, "gpu6", nil), deployment("md-sdxl", 0, "gpu4", nil)}
	for _, p := range []struct {
		pod, app, claim string
		offset, n       int
	}{{"bge-1", "md-bge-embed", "bge-1-gpu", 0, 2}, {"qwen-1", "md-qwen32b", "qwen-1-gpu", 2, 6}} {
		objs = append(objs, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.pod, Labels: map[string]string{"app": p.app}}})
		c := allocatedClaim(p.claim, "gpu-node", p.offset, p.n)
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.pod}}
		objs = append(objs, c)
	}
	return objs
}

func sdxlSchedule() *v1alpha1.DeploySchedule {
	ds := weekSchedule()
	ds.Name, ds.UID = "sdxl", "uid-sdxl"
	ds.Spec.Targets = []v1alpha1.ScheduleTarget{{Name: "sdxl", DefaultState: v1alpha1.StateStopped,
		WorkloadRef: v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-sdxl"}}}
	ds.Spec.Windows[0].States = []v1alpha1.TargetState{{Target: "sdxl", DesiredState: v1alpha1.StateRunning}}
	return ds
}

// TestForecastCondition: the week on 10 GPUs fits; a second schedule that
// runs sdxl (4 GPUs) in business hours over-commits both schedules'
// business hours (8 + 4 + 2 = 14 of 10), turning each one's Forecast False
// with one Warning event, not one per pass.
func TestForecastCondition(t *testing.T) {
	e := newEnv(t, at(19, 0, 0), forecastPool()...)
	e.addSchedule(weekSchedule())
	e.mustPass("pool")
	forecast := func(name string) metav1.Condition {
		c := meta.FindStatusCondition(e.schedule(name).Status.Conditions, v1alpha1.ConditionForecast)
		if c == nil {
			t.Fatalf("%s has no Forecast condition", name)
		}
		return *c
	}
	if c := forecast("pool"); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonForecastFits {
		t.Fatalf("Forecast %s/%s: %s, want True", c.Status, c.Reason, c.Message)
	}

	e.addSchedule(sdxlSchedule())
	e.clock.Step(DefaultForecastPeriod) // no informer here to forget the forecast at once
	for range 3 {
		e.mustPass("sdxl")
		e.mustPass("pool")
		e.clock.Step(DefaultForecastPeriod)
	}
	for _, name := range []string{"pool", "sdxl"} {
		c := forecast(name)
		if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonForecastOvercommitted {
			t.Fatalf("%s: Forecast %s/%s: %s, want False", name, c.Status, c.Reason, c.Message)
		}
		for _, want := range []string{"the first: (no model) Mon 2026-10-19 08:00", "asks for 14 of 10 GPUs (count)",
			"serving/pool/llama70b, serving/sdxl/sdxl", "also running: serving/Pod/bge-1"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("%s: Forecast message %q does not say %q", name, c.Message, want)
			}
		}
	}
	warnings := 0
	for {
		select {
		case ev := <-e.recorder.Events:
			if strings.HasPrefix(ev, "Warning "+v1alpha1.ReasonForecastOvercommitted) {
				warnings++
			}
			continue
		default:
		}
		break
	}
	if warnings != 2 {
		t.Errorf("%d Overcommitted warnings over three passes of two schedules, want 2 (one each)", warnings)
	}
}

// A forecast that cannot be read leaves the condition Unknown and the pass
// going on; a workload the forecast cannot count (its claim template is
// missing) is left out, not everyone's forecast.
func TestForecastUnknownAndLeftOut(t *testing.T) {
	e := newEnv(t, at(19, 0, 0), forecastPool()...)
	e.addSchedule(weekSchedule())
	if err := e.client.Tracker().Delete(resourceapi.SchemeGroupVersion.WithResource("resourceclaimtemplates"), ns, "gpu8"); err != nil {
		t.Fatal(err)
	}
	e.mustPass("pool")
	c := meta.FindStatusCondition(e.schedule("pool").Status.Conditions, v1alpha1.ConditionForecast)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Forecast %+v, want True with llama70b left out", c)
	}
	e.dyn.PrependReactor("list", "gpureservations", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is on fire")
	})
	e.clock.Step(DefaultForecastPeriod)
	e.mustPass("pool")
	c = meta.FindStatusCondition(e.schedule("pool").Status.Conditions, v1alpha1.ConditionForecast)
	if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != v1alpha1.ReasonForecastFailed || !strings.Contains(c.Message, "etcd is on fire") {
		t.Fatalf("Forecast %+v, want Unknown saying why", c)
	}
}

// TestForecastFollowsItsInputs: the forecast is shared by every schedule
// and computed again only when its inputs may have changed — at once when
// a schedule's spec changes (its generation), and for what the controller
// reads by list (capacity, claims) when the forecast period lapses — not
// when the controller's own status writes come back through the informer.
func TestForecastFollowsItsInputs(t *testing.T) {
	e := newEnv(t, at(19, 0, 0), forecastPool()...)
	e.addSchedule(weekSchedule())
	factory := dynamicinformer.NewDynamicSharedInformerFactory(e.dyn, 0)
	if err := e.ctrl.watch(factory); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(stop, e.ctrl.informer.HasSynced) {
		t.Fatal("informer not synced")
	}
	forecast := func() metav1.Condition {
		t.Helper()
		c := meta.FindStatusCondition(e.schedule("pool").Status.Conditions, v1alpha1.ConditionForecast)
		if c == nil {
			t.Fatal("no Forecast condition")
		}
		return *c
	}
	// seen waits until the informer holds the schedule as stored, so the
	// controller's own status writes have reached its handlers.
	seen := func() {
		t.Helper()
		err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			obj, ok, err := e.ctrl.informer.GetStore().GetByKey(ns + "/pool")
			if err != nil || !ok {
				return false, err
			}
			return obj.(metav1.Object).GetResourceVersion() == e.schedule("pool").ResourceVersion, nil
		})
		if err != nil {
			t.Fatalf("informer never saw the stored schedule: %v", err)
		}
	}
	resize := func(n int) {
		t.Helper()
		s := gpuSlice("gpu-node", n)
		if _, err := e.client.ResourceV1().ResourceSlices().Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	e.mustPass("pool")
	if c := forecast(); c.Status != metav1.ConditionTrue {
		t.Fatalf("Forecast %s: %s, want True on 10 GPUs", c.Status, c.Message)
	}
	// 8 GPUs: business hours ask for 10 (llama70b 8, bge 2).
	resize(8)
	for range 3 {
		e.mustPass("pool")
		seen()
	}
	if c := forecast(); c.Status != metav1.ConditionTrue {
		t.Fatalf("Forecast %s: %s; want the forecast reused within its period (status writes are no new input)", c.Status, c.Message)
	}
	e.clock.Step(DefaultForecastPeriod)
	e.mustPass("pool")
	if c := forecast(); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "asks for 10 of 8 GPUs (count)") {
		t.Fatalf("Forecast %s: %s; want False on 8 GPUs once the period lapsed", c.Status, c.Message)
	}
	// Back to 10 GPUs, and a spec change: the forecast is computed again at
	// once, with no time passing.
	resize(10)
	e.mustPass("pool")
	seen()
	if c := forecast(); c.Status != metav1.ConditionFalse {
		t.Fatalf("Forecast %s: %s; want the forecast reused within its period", c.Status, c.Message)
	}
	ds := e.schedule("pool")
	ds.Spec.Windows[0].Priority++
	ds.Generation++
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Update(e.ctx, unstructuredOf(obj), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informer's handler forgets the forecast after its store holds the
	// new spec; pass until it has (the clock stands still).
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		e.mustPass("pool")
		return forecast().Status == metav1.ConditionTrue, nil
	}); err != nil {
		c := forecast()
		t.Fatalf("Forecast %s: %s; want True on 10 GPUs after the spec changed", c.Status, c.Message)
	}
}
