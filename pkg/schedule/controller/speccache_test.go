package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/forecast"
	"github.com/rota-dev/rota/pkg/schedule/validation"
)

// countValidations makes the controller's passes and its forecast count
// each validation of a schedule's spec.
func (e *env) countValidations() *int {
	n := new(int)
	e.ctrl.specs.validate = func(ds *v1alpha1.DeploySchedule) field.ErrorList {
		*n++
		return validation.ValidateDeploySchedule(ds)
	}
	return n
}

// forecastSchedules is what the forecast reads of the controller's
// DeploySchedule informer.
func (e *env) forecastSchedules() ([]*v1alpha1.DeploySchedule, []string) {
	e.t.Helper()
	valid, invalid, err := e.ctrl.forecasts.sources.Schedules.ValidSchedules(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return valid, invalid
}

// updateSpec changes the stored schedule's spec as a user's update does:
// the API server gives it the next generation (the fake client does not).
func (e *env) updateSpec(name string, change func(*v1alpha1.DeploySchedule)) {
	e.t.Helper()
	ds := e.stored(name)
	change(ds)
	ds.Generation++
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Update(e.ctx, unstructuredOf(obj), metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestScheduleValidatedOncePerGeneration: the passes and the capacity
// forecast share one validation per generation of a schedule. The status
// writes of the passes (a new resourceVersion, the same generation) make
// neither validate it again; a spec change (a new generation) makes one
// of them validate it once, and both see the new spec.
func TestScheduleValidatedOncePerGeneration(t *testing.T) {
	e := newEnv(t, at(19, 0, 0), forecastPool()...)
	e.casSchedules()
	ds := weekSchedule()
	ds.ResourceVersion = "1" // as an API server stores it; the fake stores none
	e.addSchedule(ds)
	catchUp := e.handFedSchedules(t)
	validations := e.countValidations()
	want := func(when string, n int) {
		t.Helper()
		if *validations != n {
			t.Fatalf("%s: the schedule was validated %d times in all, want %d", when, *validations, n)
		}
	}

	// The first pass validates it, and its forecast reads the same
	// generation.
	if _, writes, _ := e.passCounts("pool"); writes != 1 {
		t.Fatalf("the first pass wrote the status %d times, want 1", writes)
	}
	want("after the first pass and its forecast", 1)
	if c := meta.FindStatusCondition(e.stored("pool").Status.Conditions, v1alpha1.ConditionForecast); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Forecast condition %+v, want True", c)
	}

	// The status write gave it a new resourceVersion; the cache catches up
	// and the forecast is computed again.
	catchUp()
	e.ctrl.forecasts.forget()
	e.mustPass("pool")
	valid, invalid := e.forecastSchedules()
	if len(valid) != 1 || len(invalid) != 0 {
		t.Fatalf("forecast schedules: %v valid, %q invalid; want pool valid", names(valid), invalid)
	}
	want("after a status write, a pass and a forecast", 1)

	// A spec change is validated once, for both.
	e.updateSpec("pool", func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Priority = 20 })
	catchUp()
	e.ctrl.forecasts.forget()
	e.mustPass("pool")
	want("after a spec change, a pass and a forecast", 2)
	valid, _ = e.forecastSchedules()
	if len(valid) != 1 || valid[0].Generation != 2 || valid[0].Spec.Windows[0].Priority != 20 {
		t.Fatalf("the forecast reads %+v, want generation 2 with priority 20", valid)
	}
	want("after reading the forecast's schedules again", 2)

	// The forecast may come first: a new schedule's pass then finds it
	// validated.
	sdxl := sdxlSchedule()
	sdxl.ResourceVersion = "1"
	e.addSchedule(sdxl)
	catchUp()
	if valid, _ := e.forecastSchedules(); len(valid) != 2 {
		t.Fatalf("forecast schedules: %v, want pool and sdxl", names(valid))
	}
	want("after the forecast read a new schedule", 3)
	e.mustPass("sdxl")
	want("after the new schedule's first pass", 3)
}

// TestInvalidScheduleSharedWithTheForecast: a schedule the pass found
// invalid is named in the forecast with the message the forecast always
// gave, without validating it again.
func TestInvalidScheduleSharedWithTheForecast(t *testing.T) {
	e := newEnv(t, at(19, 0, 0), forecastPool()...)
	e.casSchedules()
	ds := weekSchedule()
	ds.ResourceVersion = "1"
	ds.Spec.TimeZone = "Mars/Olympus"
	e.addSchedule(ds)
	catchUp := e.handFedSchedules(t)
	validations := e.countValidations()

	e.mustPass("pool")
	if c := meta.FindStatusCondition(e.stored("pool").Status.Conditions, "Valid"); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Valid condition %+v, want False", c)
	}
	catchUp() // the status write is in the cache
	valid, invalid := e.forecastSchedules()
	u, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Get(e.ctx, "pool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, msg, err := forecast.DecodeSchedule(u)
	if err != nil || msg == "" {
		t.Fatalf("DecodeSchedule: %q, %v; want a message", msg, err)
	}
	if len(valid) != 0 || len(invalid) != 1 || invalid[0] != msg {
		t.Fatalf("forecast schedules: %v valid, %q invalid; want only %q", names(valid), invalid, msg)
	}
	if *validations != 1 {
		t.Fatalf("validated %d times, want once", *validations)
	}
}

// TestScheduleWithoutGenerationValidatedEveryRead: an object without a
// generation (a fake's) cannot be told from its next spec, so every pass
// and every forecast validates it again and sees its current spec.
func TestScheduleWithoutGenerationValidatedEveryRead(t *testing.T) {
	e := newEnv(t, at(19, 0, 0), forecastPool()...)
	ds := weekSchedule()
	ds.Generation = 0
	e.addSchedule(ds)
	catchUp := e.handFedSchedules(t)
	validations := e.countValidations()

	e.mustPass("pool")
	e.mustPass("pool")
	if *validations < 2 {
		t.Fatalf("two passes validated %d times, want each pass to", *validations)
	}
	before := *validations
	e.forecastSchedules()
	e.forecastSchedules()
	if got := *validations - before; got != 2 {
		t.Fatalf("two forecast reads validated %d times, want 2", got)
	}

	// The spec changes and the generation stays 0: both see the change.
	stored := e.stored("pool")
	stored.Spec.Windows[0].Priority = 30
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Update(e.ctx, unstructuredOf(obj), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	catchUp()
	if valid, _ := e.forecastSchedules(); len(valid) != 1 || valid[0].Spec.Windows[0].Priority != 30 {
		t.Fatalf("the forecast reads %+v, want priority 30", valid)
	}
	var seen []int32
	e.ctrl.specs.validate = func(ds *v1alpha1.DeploySchedule) field.ErrorList {
		seen = append(seen, ds.Spec.Windows[0].Priority)
		return validation.ValidateDeploySchedule(ds)
	}
	e.mustPass("pool")
	if len(seen) == 0 || seen[0] != 30 {
		t.Fatalf("the pass validated priorities %v, want the current 30", seen)
	}
}
