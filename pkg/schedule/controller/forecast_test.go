package controller

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

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
