package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/reservation"
)

// fakeClients are a clientset with node n1 and a dynamic client with the
// GPUReservation ns/r asking for one GPU of n1.
func fakeClients(t *testing.T) (*fake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	res := &rotav1.GPUReservation{
		TypeMeta:   metav1.TypeMeta{APIVersion: rotav1.SchemeGroupVersion.String(), Kind: "GPUReservation"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
		Spec:       rotav1.GPUReservationSpec{NodeName: "n1", Count: ptr.To[int32](1)},
	}
	u, err := reservation.ToUnstructured(res)
	if err != nil {
		t.Fatal(err)
	}
	// An empty scheme keeps the objects unstructured, as on an API server.
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{rotav1.GPUReservationsResource: "GPUReservationList"}, u)
	return client, dyn
}

func TestNewRequiresInformers(t *testing.T) {
	client, dyn := fakeClients(t)
	opts := Options{Client: client, Dynamic: dyn, Clock: clocktesting.NewFakePassiveClock(time.Now()), Recorder: record.NewFakeRecorder(10)}
	_, err := New(opts)
	if err == nil {
		t.Fatal("New accepted Options without informers")
	}
	for _, field := range []string{"Reservations", "Slices", "Claims", "Rules", "Classes", "Pods", "Nodes", "ReplicaSets", "Deployments", "StatefulSets", "Jobs"} {
		if !strings.Contains(err.Error(), "Informers."+field+" is required") {
			t.Errorf("error %q does not name Informers.%s", err, field)
		}
	}
	opts.Informers = NewInformers(informers.NewSharedInformerFactory(client, 0), dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0))
	if _, err := New(opts); err != nil {
		t.Errorf("New with informers: %v", err)
	}
}

// startedController builds the controller on fake clients and starts its
// informers as a binary does; they stop when the test ends. setup runs on
// the typed client before the informers start: a fake's reactors may only
// be added while nothing calls it.
func startedController(t *testing.T, setup ...func(*fake.Clientset)) (context.Context, context.CancelFunc, *Controller, *fake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client, dyn := fakeClients(t)
	for _, f := range setup {
		f(client)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c, err := New(Options{
		Client: client, Dynamic: dyn, Clock: clocktesting.NewFakePassiveClock(time.Now()), Recorder: record.NewFakeRecorder(10),
		Informers: NewInformers(factory, dynFactory),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		dynFactory.Shutdown()
	})
	return ctx, cancel, c, client, dyn
}

// TestSyncReadsFromInformers: the caller starts the informers; a sync reads
// the reservation, the node's GPUs, claims, rules and pods from their
// caches, so the only LISTs the API server sees are the informers' own.
func TestSyncReadsFromInformers(t *testing.T) {
	ctx, _, c, client, dyn := startedController(t)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	lists := func() map[string]int {
		n := map[string]int{}
		for _, a := range append(client.Actions(), dyn.Actions()...) {
			if a.GetVerb() == "list" {
				n[a.GetResource().Resource]++
			}
		}
		return n
	}
	before := lists()
	for range 2 {
		if err := c.sync(ctx, "ns/r"); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(before, lists()); diff != "" {
		t.Errorf("syncs listed from the API server (-before +after):\n%s", diff)
	}
	u, err := dyn.Resource(rotav1.GPUReservationsResource).Namespace("ns").Get(ctx, "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := reservation.FromObject(u)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status.Phase != rotav1.ReservationPending || len(res.Status.Conditions) == 0 || res.Status.Conditions[0].Reason != ReasonNoGPUs {
		t.Errorf("status %+v, want Pending with Ready reason %s", res.Status, ReasonNoGPUs)
	}
}

// TestRunReturnsAfterItsWorkers: Run waits for informers the caller
// started and returns once ctx ends and its workers have stopped.
func TestRunReturnsAfterItsWorkers(t *testing.T) {
	ctx, cancel, c, _, dyn := startedController(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()
	// The reservation's status is written once a worker has synced it.
	deadline := time.After(30 * time.Second)
	for !statusWritten(dyn) {
		select {
		case <-deadline:
			t.Fatal("no worker synced the reservation")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
}

func statusWritten(dyn *dynamicfake.FakeDynamicClient) bool {
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			return true
		}
	}
	return false
}
