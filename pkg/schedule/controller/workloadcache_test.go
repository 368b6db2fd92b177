package controller

import (
	"context"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// startCaches rebuilds e's controller as the binary builds it — workloads
// read from a typed informer factory, schedules from a dynamic one — and
// starts both factories until the test ends.
func (e *env) startCaches(t testing.TB) informers.SharedInformerFactory {
	t.Helper()
	factory := informers.NewSharedInformerFactory(e.client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(e.dyn, 0)
	c, err := New(Options{Client: e.client, Dynamic: e.dyn, Clock: e.clock, Recorder: e.recorder,
		GateNamespace: gateNS, GateFactory: e.gates, Failpoints: e.fp, Factory: factory, DynFactory: dynFactory})
	if err != nil {
		t.Fatal(err)
	}
	e.ctrl = c
	ctx, cancel := context.WithCancel(e.ctx)
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		dynFactory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), append([]cache.InformerSynced{c.informer.HasSynced}, c.synced...)...) {
		t.Fatal("informers not synced")
	}
	return factory
}

// checkResourceVersions makes the fake clientset refuse a Deployment update
// whose resourceVersion is set but not the stored one, as the API server
// does (an update without one is unconditional), and give every accepted
// write a new resourceVersion.
func (e *env) checkResourceVersions() {
	gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
	e.client.PrependReactor("update", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment)
		stored, err := e.client.Tracker().Get(gvr, d.Namespace, d.Name)
		if err != nil {
			return true, nil, err
		}
		rv := stored.(*appsv1.Deployment).ResourceVersion
		if d.ResourceVersion != "" && d.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), d.Name, errStale)
		}
		n, _ := strconv.Atoi(rv)
		d.ResourceVersion = strconv.Itoa(n + 1)
		return false, nil, nil // the tracker stores it
	})
}

var errStale = staleError{}

type staleError struct{}

func (staleError) Error() string { return "the object has been modified" }

// TestStaleCacheReadDoesNotOverwrite: the controller reads workloads from
// an informer cache that can lag the API server. A step computed from a
// stale read must not overwrite a change made since (here a user's new
// image): the write carries the stale resourceVersion, fails with a
// conflict, and the step is submitted again from a fresh read.
func TestStaleCacheReadDoesNotOverwrite(t *testing.T) {
	objs := poolObjects()
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			d.ResourceVersion = "1"
		}
	}
	e := newEnv(t, at(19, 7, 59), objs...)
	e.checkResourceVersions()
	e.addSchedule(weekSchedule())
	// The caches are filled by hand and never updated, so what the
	// controller reads is exactly as stale as the test makes it.
	factory := informers.NewSharedInformerFactory(e.client, 0)
	c, err := New(Options{Client: e.client, Dynamic: e.dyn, Clock: e.clock, Recorder: e.recorder,
		GateNamespace: gateNS, GateFactory: e.gates, Failpoints: e.fp, Factory: factory})
	if err != nil {
		t.Fatal(err)
	}
	e.ctrl = c
	store := factory.Apps().V1().Deployments().Informer().GetStore()
	snapshot := func() {
		t.Helper()
		list, err := e.client.AppsV1().Deployments(ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if err := store.Update(&list.Items[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshot()
	if _, err := e.reconcile("pool"); err != nil {
		t.Fatal(err)
	}
	if got := e.targetStatus("pool", "qwen32b").Phase; got != v1alpha1.TargetPhaseConverged {
		t.Fatalf("before 08:00 qwen32b phase = %s, want Converged", got)
	}

	// A user rolls qwen32b to a new image; the cache does not see it yet.
	d, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, "md-qwen32b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "qwen:v2"
	if _, err := e.client.AppsV1().Deployments(ns).Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// 08:00 stops qwen32b, from the stale read.
	e.clock.SetTime(at(19, 8, 0))
	requeue, err := e.reconcile("pool")
	if err != nil {
		t.Fatalf("a conflict is an expected wait, not an error: %v", err)
	}
	if requeue <= 0 || requeue > DefaultProgressPeriod {
		t.Errorf("requeue after the conflict = %s, want a retry soon", requeue)
	}
	got := e.deployment("md-qwen32b")
	if img := got.Spec.Template.Spec.Containers[0].Image; img != "qwen:v2" {
		t.Fatalf("after the stale write qwen32b's image is %q: the user's change was overwritten", img)
	}
	if r := ptr.Deref(got.Spec.Replicas, 1); r != 1 {
		t.Fatalf("qwen32b replicas = %d after a write from a stale read, want it refused (1)", r)
	}

	// The cache catches up; the step is submitted again and keeps the
	// user's change.
	snapshot()
	if _, err := e.reconcile("pool"); err != nil {
		t.Fatal(err)
	}
	got = e.deployment("md-qwen32b")
	if r := ptr.Deref(got.Spec.Replicas, 1); r != 0 {
		t.Fatalf("qwen32b replicas = %d after the cache caught up, want 0 (stopped)", r)
	}
	if img := got.Spec.Template.Spec.Containers[0].Image; img != "qwen:v2" {
		t.Fatalf("qwen32b's image is %q after the stop, want the user's qwen:v2", img)
	}
}

// TestPassesReadWorkloadsFromCaches: with informers, a converged pass and
// the forecast read no workload from the API server, and the informers'
// verbs are allowed by rbac.yaml.
func TestPassesReadWorkloadsFromCaches(t *testing.T) {
	e := newEnv(t, at(19, 7, 59), poolObjects()...)
	e.addSchedule(weekSchedule())
	e.startCaches(t)
	informerCalls := map[string]bool{}
	for _, a := range append(e.client.Actions(), e.dyn.Actions()...) {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			informerCalls[a.GetVerb()+" "+a.GetResource().Group+"/"+a.GetResource().Resource] = true
		}
	}
	for _, want := range []string{"list apps/deployments", "watch apps/deployments", "list apps/statefulsets", "watch apps/statefulsets"} {
		if !informerCalls[want] {
			t.Errorf("the informers made no %q; calls: %v", want, informerCalls)
		}
	}
	checkCalls(t, loadRules(t), informerCalls)
	for range 2 {
		e.ctrl.forecasts.forget()
		if _, err := e.reconcile("pool"); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.targetStatus("pool", "qwen32b").Phase; got != v1alpha1.TargetPhaseConverged {
		t.Fatalf("qwen32b phase = %s, want Converged", got)
	}
	for _, get := range []string{"get apps/deployments", "get apps/statefulsets"} {
		if e.calls[get] {
			t.Errorf("a pass with informers made %q; calls: %v", get, e.calls)
		}
	}
}

func (e *env) deployment(name string) *appsv1.Deployment {
	e.t.Helper()
	d, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}
