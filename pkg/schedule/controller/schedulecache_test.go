package controller

import (
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// casSchedules makes the fake dynamic client treat DeploySchedule writes
// as the API server does: an update (or status update) carrying a
// resourceVersion other than the stored one fails with a conflict, and an
// accepted one gets a new resourceVersion.
func (e *env) casSchedules() {
	gvr := v1alpha1.DeploySchedulesResource
	e.dyn.PrependReactor("update", gvr.Resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		stored, err := e.dyn.Tracker().Get(gvr, u.GetNamespace(), u.GetName())
		if err != nil {
			return true, nil, err
		}
		rv := stored.(*unstructured.Unstructured).GetResourceVersion()
		if u.GetResourceVersion() != rv {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), u.GetName(), errStale)
		}
		n, _ := strconv.Atoi(rv)
		u.SetResourceVersion(strconv.Itoa(n + 1))
		return false, nil, nil // the tracker stores it
	})
}

// handFedSchedules gives the controller a synced DeploySchedule informer
// whose watch delivers nothing: the cache holds the list it started with
// until catchUp copies what the API server holds into it, so the test
// decides exactly how stale the controller's cache is.
func (e *env) handFedSchedules(t *testing.T) (catchUp func()) {
	t.Helper()
	e.dyn.PrependWatchReactor(v1alpha1.DeploySchedulesResource.Resource, func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	e.startCaches(t)
	c := e.ctrl
	return func() {
		t.Helper()
		list, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if err := c.informer.GetStore().Update(&list.Items[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// stored is the schedule as the API server holds it, read by the test
// (not through the controller).
func (e *env) stored(name string) *v1alpha1.DeploySchedule {
	e.t.Helper()
	u, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ds v1alpha1.DeploySchedule
	if err := fromUnstructured(u, &ds); err != nil {
		e.t.Fatal(err)
	}
	return &ds
}

// passCounts runs one pass and returns its requeue, the schedule status
// writes it attempted and the Events it emitted.
func (e *env) passCounts(name string) (requeue time.Duration, statusWrites, events int) {
	e.t.Helper()
	nd := len(e.dyn.Actions())
	ne := len(e.recorder.Events)
	requeue, err := e.reconcile(name)
	if err != nil {
		e.t.Fatalf("pass: %v", err)
	}
	for _, a := range e.dyn.Actions()[nd:] {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			statusWrites++
		}
	}
	e.settle(true)
	return requeue, statusWrites, len(e.recorder.Events) - ne
}

// TestStaleScheduleCacheAfterOwnWrite: right after a pass writes its
// schedule's status, the informer cache still holds the schedule as it
// was. The next pass must not act on that copy — it would plan the
// transition again, emit its Events again and lose a compare-and-swap —
// so it reads the API; once the cache holds the version the controller
// wrote, passes read the cache and make no request for their schedule.
func TestStaleScheduleCacheAfterOwnWrite(t *testing.T) {
	e := newEnv(t, at(19, 7, 59), poolObjects()...)
	e.casSchedules()
	e.addSchedule(weekSchedule())
	catchUp := e.handFedSchedules(t)

	if _, writes, _ := e.passCounts("pool"); writes != 1 {
		t.Fatalf("the first pass wrote the status %d times, want 1", writes)
	}
	// The cache still has the schedule without a status.
	requeue, writes, events := e.passCounts("pool")
	if writes != 0 || events != 0 || requeue == time.Second {
		t.Errorf("the pass after the first status write: %d status writes, %d Events, requeue %s; want none, none and no conflict retry", writes, events, requeue)
	}
	if !e.calls["get rota.dev/deployschedules"] {
		t.Errorf("the pass behind its own write did not read the API; calls: %v", e.calls)
	}

	// 08:00: qwen32b is stopped (Submitting, the write, Accepted), the
	// cache sees none of it.
	e.clock.SetTime(at(19, 8, 0))
	if _, writes, _ := e.passCounts("pool"); writes < 2 {
		t.Fatalf("the 08:00 pass wrote the status %d times, want the step's checkpoints", writes)
	}
	if got := e.replicas("md-qwen32b"); got != 0 {
		t.Fatalf("qwen32b replicas = %d after 08:00, want 0", got)
	}
	after := e.stored("pool").Status
	for range 3 {
		if requeue, _, _ := e.passCounts("pool"); requeue == time.Second {
			t.Errorf("a pass behind the controller's own write lost a compare-and-swap")
		}
	}
	// Release first: qwen32b was stopped once; llama70b is started once
	// the stop converged.
	if n := e.writesOf("md-qwen32b"); n != 1 {
		t.Errorf("qwen32b was written %d times, want 1 (the 08:00 stop, not redone)", n)
	}
	if n := e.writesOf("md-llama70b"); n > 1 {
		t.Errorf("llama70b was written %d times, want at most 1", n)
	}
	st := e.stored("pool").Status
	for _, target := range st.Targets {
		if len(target.Steps) != 1 {
			t.Errorf("target %s has steps %+v after passes on a stale cache, want one (the 08:00 step, not planned again)", target.Name, target.Steps)
		}
	}
	if st.LastPassTime == nil || after.LastPassTime == nil || st.LastPassTime.Before(after.LastPassTime) {
		t.Errorf("status regressed: lastPassTime %v, was %v", st.LastPassTime, after.LastPassTime)
	}

	// The cache catches up: a converged pass reads only the cache.
	e.converge("pool", 10)
	catchUp()
	e.calls = nil
	if requeue, writes, events := e.passCounts("pool"); writes != 0 || events != 0 || requeue == time.Second {
		t.Errorf("a converged pass on a fresh cache: %d status writes, %d Events, requeue %s", writes, events, requeue)
	}
	if len(e.calls) != 0 {
		t.Errorf("a converged pass on a fresh cache made requests: %v", e.calls)
	}
	if n, m := e.writesOf("md-qwen32b"), e.writesOf("md-llama70b"); n != 1 || m != 1 {
		t.Errorf("after the 08:00 swap: qwen32b written %d times, llama70b %d; want once each", n, m)
	}
}

// writesOf counts updates of the Deployment name (not its status).
func (e *env) writesOf(name string) int {
	n := 0
	for _, a := range e.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetResource().Resource == "deployments" && a.GetSubresource() == "" {
			if m, err := meta.Accessor(u.GetObject()); err == nil && m.GetName() == name {
				n++
			}
		}
	}
	return n
}

// TestScheduleConflictRereadsAPI: a user changes the schedule and the
// cache has not seen it; the 08:00 pass, planned from the cache, loses its
// compare-and-swap before touching a workload. The next pass must not
// plan from the same stale copy again (it would lose again until the
// watch caught up): it reads the API, and the stop is submitted once.
func TestScheduleConflictRereadsAPI(t *testing.T) {
	e := newEnv(t, at(19, 7, 59), poolObjects()...)
	e.casSchedules()
	e.addSchedule(weekSchedule())
	catchUp := e.handFedSchedules(t)
	e.mustPass("pool")
	catchUp()

	// A user labels the schedule; the cache does not see it.
	ds := e.stored("pool")
	u, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Get(e.ctx, "pool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"team": "serving"})
	if _, err := e.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Update(e.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	e.clock.SetTime(at(19, 8, 0))
	requeue, _, _ := e.passCounts("pool")
	if requeue != time.Second {
		t.Fatalf("the pass from the stale cache: requeue %s, want the conflict retry (1s)", requeue)
	}
	if n := e.workloadWrites(); n != 0 {
		t.Fatalf("a pass that lost its compare-and-swap wrote %d workloads", n)
	}
	if st := e.stored("pool").Status; st.LastPassTime == nil || !st.LastPassTime.Equal(ds.Status.LastPassTime) {
		t.Fatalf("the status changed through a lost compare-and-swap: %+v", st)
	}

	// The cache is still behind: the next pass reads the API and stops
	// qwen32b, once.
	if requeue, _, _ := e.passCounts("pool"); requeue == time.Second {
		t.Fatalf("the pass after a conflict planned from the same stale cache and lost again")
	}
	if n, r := e.workloadWrites(), e.replicas("md-qwen32b"); n != 1 || r != 0 {
		t.Fatalf("after the re-read: %d workload writes, qwen32b replicas %d; want the stop, once", n, r)
	}
	got := e.stored("pool")
	if got.Labels["team"] != "serving" {
		t.Errorf("the user's label was lost: %v", got.Labels)
	}
	for _, target := range got.Status.Targets {
		if target.Name == "qwen32b" && (len(target.Steps) != 1 || target.Steps[0].Phase == v1alpha1.StepPlanned) {
			t.Errorf("qwen32b steps %+v, want the stop submitted", target.Steps)
		}
	}
}
