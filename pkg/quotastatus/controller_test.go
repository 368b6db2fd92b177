package quotastatus

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// TestSyncWritesOnlyChanges: the first sync writes both statuses; once the
// informer holds them, a sync with nothing changed writes none, and a
// claim allocated since writes again.
func TestSyncWritesOnlyChanges(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var objs []runtime.Object
	for _, q := range []*rotav1.GPUQuota{
		quota("team-a", 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 2}),
		quota("team-b", 1, rotav1.ModelQuota{Model: "H100", Guaranteed: 2}),
	} {
		u, err := gpuquota.ToUnstructured(q)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		rotav1.GPUQuotasResource: "GPUQuotaList", rotav1.GPUReservationsResource: "GPUReservationList",
	}, objs...)
	client := fake.NewClientset(slice("n1", "H100", 4, nil, nil))
	factory := informers.NewSharedInformerFactory(client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c, err := New(Options{Dynamic: dyn, Clock: testingclock.NewFakePassiveClock(time.Now()), Informers: NewInformers(factory, dynFactory)})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	defer func() {
		cancel() // before Shutdown, which waits for the informers to stop
		factory.Shutdown()
		dynFactory.Shutdown()
	}()
	for _, synced := range c.synced {
		if !waitFor(ctx, synced) {
			t.Fatal("informers did not sync")
		}
	}
	statusWrites := func() int {
		n := 0
		for _, a := range dyn.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	// observed waits until the informer's copy of every GPUQuota has the
	// used count given.
	observed := func(used int32) bool {
		return waitFor(ctx, func() bool {
			qs, err := c.listQuotas()
			if err != nil {
				return false
			}
			for _, q := range qs {
				if len(q.Status.Models) != 1 || (q.Name == "team-b" && q.Status.Models[0].Used != used) {
					return false
				}
			}
			return true
		})
	}

	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := statusWrites(); got != 2 {
		t.Fatalf("first sync wrote %d statuses, want 2", got)
	}
	if !observed(0) {
		t.Fatal("the informer never saw the statuses")
	}
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := statusWrites(); got != 2 {
		t.Errorf("a sync with nothing changed wrote %d statuses more", got-2)
	}

	if _, err := client.ResourceV1().ResourceClaims("team-b").Create(ctx, claim("team-b", "train", "n1", 0, 1, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !waitFor(ctx, func() bool {
		cs, _ := c.claims.List(labels.Everything())
		return len(cs) == 1
	}) {
		t.Fatal("the informer never saw the claim")
	}
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	// team-b uses 3 (borrows 1), team-a lends 1: both change.
	if got := statusWrites(); got != 4 {
		t.Errorf("after a claim was allocated: %d status writes in all, want 4", got)
	}
	if !observed(3) {
		t.Error("team-b's status does not say it uses 3")
	}
}

func waitFor(ctx context.Context, cond func() bool) bool {
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	return err == nil
}
