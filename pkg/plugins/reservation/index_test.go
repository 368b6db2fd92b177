package reservation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// TestClaimsNear: the claims read for a reservation's budget are those
// allocated on its GPUs and those that tolerate it (or every taint), not
// the others.
func TestClaimsNear(t *testing.T) {
	res := heldGPUs(boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a"), 2)
	wildcard := claim("team-b", "wild", "", 1024)
	wildcard.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Operator: resourceapi.DeviceTolerationOpExists}}
	otherDriver := allocated(claim("team-b", "nic", "", 0), "gpu-0")
	otherDriver.Status.Allocation.Devices.Results[0].Driver = "nic.example.com"
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, claimIndexers())
	for _, c := range []*resourceapi.ResourceClaim{
		allocated(claim("team-b", "on-held", "", 1024), "gpu-1"),            // no toleration: placed before the taint
		allocated(claim("team-b", "elsewhere", "", 1024), "gpu-5"),          // not held
		claim("team-a", "member", "team-a.serving", 1024),                   // pending or assumed, not written
		claim("team-a", "other-res", "team-a.other", 1024),                  // another reservation's
		allocated(claim("team-a", "both", "team-a.serving", 1024), "gpu-0"), // once
		wildcard,
		otherDriver,
	} {
		if err := idx.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	got, err := claimsNear(idx, res, rsv.HeldGPUs(res))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"team-a/both", "team-a/member", "team-b/on-held", "team-b/wild"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims near team-a/serving (-want +got):\n%s", diff)
	}
}

// TestBudgetCountsUntoleratingClaimOnHeldGPU: a claim on a held GPU counts
// against the budget although it tolerates no reservation (the device
// index finds it), as it did when every claim was read.
func TestBudgetCountsUntoleratingClaimOnHeldGPU(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := world{
		reservations: []*rotav1.GPUReservation{boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a")},
		deployments:  []string{"md-a"},
		claims: addClaims(claimMap{},
			allocated(claim("team-b", "early", "", 100000), "gpu-0"),
			allocated(claim("team-b", "elsewhere", "", 100000), "gpu-3"),
			claim("team-a", "c", "team-a.serving", 50000)),
	}
	pl := w.plugin(t)
	p := pod("team-a", "c-0", "md-a", "c", "")
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, cs, p, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	st := pl.Filter(ctx, cs, p, nodeN1())
	if !strings.Contains(st.Message(), "claims hold 100000 MiB in 1 claim(s)") {
		t.Errorf("Filter: %v, want the claim on gpu-0 (and only it) counted", st)
	}
}

// TestUndecodableReservationFailsPreFilter: a GPUReservation the transform
// cannot decode stays in the store as it came, and a member lookup in its
// namespace fails on it as the namespace's listing did.
func TestUndecodableReservationFailsPreFilter(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := world{
		reservations: []*rotav1.GPUReservation{boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a")},
		deployments:  []string{"md-a"},
		claims:       addClaims(claimMap{}, claim("team-a", "c", "team-a.serving", 1024)),
	}
	pl := w.plugin(t)
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rotav1.SchemeGroupVersion.String(), "kind": "GPUReservation",
		"metadata": map[string]any{"namespace": "team-a", "name": "bad"},
		"spec":     map[string]any{"nodeName": 42},
	}}
	obj, err := toTypedReservation(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.(*unstructured.Unstructured); !ok {
		t.Fatalf("transform gave %T, want the undecodable object kept", obj)
	}
	if err := pl.reservations.Add(obj); err != nil {
		t.Fatal(err)
	}
	_, st := pl.PreFilter(ctx, framework.NewCycleState(), pod("team-a", "c-0", "md-a", "c", ""), nil)
	if st.IsSuccess() || !strings.Contains(st.Message(), "decoding GPUReservation team-a/bad") {
		t.Errorf("PreFilter: %v, want the decoding error", st)
	}
}

// TestTransformTypesOnce: the informer's transform hands the store a typed
// GPUReservation, indexed under each member workload.
func TestTransformTypesOnce(t *testing.T) {
	res := boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a", "md-b")
	u, err := rsv.ToUnstructured(res)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := toTypedReservation(u)
	if err != nil {
		t.Fatal(err)
	}
	typed, ok := obj.(*rotav1.GPUReservation)
	if !ok {
		t.Fatalf("transform gave %T, want *GPUReservation", obj)
	}
	keys, err := reservationMembers(typed)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"team-a/Deployment/md-a", "team-a/Deployment/md-b"}, keys); diff != "" {
		t.Errorf("member keys (-want +got):\n%s", diff)
	}
	if again, _ := toTypedReservation(typed); again != typed {
		t.Error("a typed object was converted again")
	}
}

// TestAddClaimIndexersTwice: a second profile's plugin finds the indexes
// on the shared informer and adds nothing (a second AddIndexers with the
// same names would fail).
func TestAddClaimIndexersTwice(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &resourceapi.ResourceClaim{}, 0, cache.Indexers{})
	for i := range 2 {
		if err := addClaimIndexers(inf); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for name := range claimIndexers() {
		if _, ok := inf.GetIndexer().GetIndexers()[name]; !ok {
			t.Errorf("index %s missing", name)
		}
	}
}

// TestInflightClaimCountsUntilInformed: a claim that tolerates no
// reservation but got a held GPU (its taint not in effect yet) counts
// against the budget from its pod's Reserve, while the informer does not
// show its allocation, and no longer once its pod is unreserved; the
// informer's update showing it allocated hands it to the device index.
func TestInflightClaimCountsUntilInformed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	early := claim("team-b", "early", "", 100000)
	w := world{
		reservations: []*rotav1.GPUReservation{boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a")},
		deployments:  []string{"md-a"},
		claims:       addClaims(claimMap{}, early, claim("team-a", "c", "team-a.serving", 50000)),
		pending:      pendingAllocations{},
	}
	pl := w.plugin(t)
	member := pod("team-a", "c-0", "md-a", "c", "")
	filter := func() string {
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, cs, member, nil); !st.IsSuccess() {
			t.Fatalf("PreFilter: %v", st)
		}
		return pl.Filter(ctx, cs, member, nodeN1()).Message()
	}
	other := pod("team-b", "early-0", "", "early", "")
	w.pending[early.UID] = allocation(early, "gpu-0")
	otherState := framework.NewCycleState()
	if st := pl.Reserve(ctx, otherState, other, "n1"); !st.IsSuccess() {
		t.Fatalf("Reserve of the other pod: %v", st)
	}
	if msg := filter(); !strings.Contains(msg, "claims hold 100000 MiB in 1 claim(s)") {
		t.Errorf("pending: Filter %q, want the in-flight claim counted", msg)
	}
	// Unreserved: DynamicResources drops the allocation, the plugin the claim.
	delete(w.pending, early.UID)
	pl.Unreserve(ctx, otherState, other, "n1")
	if msg := filter(); msg != "" {
		t.Errorf("unreserved: Filter %q, want admitted", msg)
	}
	if got := pl.inflight.list(); len(got) != 0 {
		t.Errorf("in flight after Unreserve: %v", got)
	}
	// Reserved again, written, and the informer's update arrives.
	w.pending[early.UID] = allocation(early, "gpu-0")
	if st := pl.Reserve(ctx, otherState, other, "n1"); !st.IsSuccess() {
		t.Fatalf("Reserve of the other pod: %v", st)
	}
	written := allocated(early, "gpu-0")
	delete(w.pending, early.UID)
	w.claims["team-b/early"] = written
	if err := pl.claimIndex.Update(written); err != nil {
		t.Fatal(err)
	}
	pl.inflight.handler().OnUpdate(early, written)
	if got := pl.inflight.list(); len(got) != 0 {
		t.Errorf("in flight after the informer showed the allocation: %v", got)
	}
	if msg := filter(); !strings.Contains(msg, "claims hold 100000 MiB in 1 claim(s)") {
		t.Errorf("written: Filter %q, want the claim counted through the device index", msg)
	}
}
