package waitreason

import (
	"hash/fnv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/waits"
)

// TestVerdictReusedUntilSomethingChanges: a waiting pod retried with
// nothing changed gets its last verdict back without a recount; a change
// the verdict depends on (a claim event, this scheduler's Reserve, another
// rejection of a node, another slice view) makes it count again, and the
// new count says what changed.
func TestVerdictReusedUntilSomethingChanges(t *testing.T) {
	w := newWorld(t, 30)
	first := w.attempt(t)
	if first.Reason != waits.InsufficientCapacity {
		t.Fatalf("reason %s (%s), want %s", first.Reason, first.Message, waits.InsufficientCapacity)
	}
	counted := func() uint64 { return w.pl.verdicts.counted.Load() }
	if got := w.attempt(t); got.Message != first.Message || counted() != 1 {
		t.Fatalf("retry with nothing changed: counted %d times (want 1), message %q", counted(), got.Message)
	}

	// A job ends: its claim's deallocation is an informer event. The
	// recount finds the freed H100s: the pod now waits on another plugin's
	// rejection of that node.
	job := "batch/job-node-00000"
	freed := w.tracker.claims[job].DeepCopy()
	freed.Status.Allocation, freed.Status.ReservedFor = nil, nil
	w.tracker.set(freed)
	if err := w.claims.Update(freed); err != nil {
		t.Fatal(err)
	}
	w.pl.changes.Add(1) // what the claim informer's handler does
	w.statuses.Set("node-00000", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin("NodeResourcesFit"))
	second := w.attempt(t)
	if counted() != 2 || second.Message == first.Message || !strings.Contains(second.Message, "node-00000: NodeResourcesFit: Insufficient cpu") {
		t.Fatalf("after a claim change: counted %d (want 2), message %q", counted(), second.Message)
	}

	// Another plugin's verdict on a node alone (no event) is part of the
	// attempt, read anew every time.
	w.statuses.Set("node-00000", fwk.NewStatus(fwk.Unschedulable, "node(s) didn't match Pod's node affinity").WithPlugin("NodeAffinity"))
	if third := w.attempt(t); counted() != 3 || !strings.Contains(third.Message, "NodeAffinity") {
		t.Fatalf("after another rejection: counted %d (want 3), message %q", counted(), third.Message)
	}
	w.attempt(t)
	if counted() != 3 {
		t.Fatalf("retry after the recount: counted %d, want 3", counted())
	}

	// This scheduler reserving devices for another pod is a change.
	if st := w.pl.Reserve(t.Context(), framework.NewCycleState(), &v1.Pod{}, "node-00003"); !st.IsSuccess() {
		t.Fatal(st)
	}
	w.attempt(t)
	if counted() != 4 {
		t.Fatalf("after a Reserve: counted %d, want 4", counted())
	}

	// Republished slices are a new view: the candidates and the count are
	// found anew, with the new devices.
	dra := w.pl.dra.(fakeDRA)
	extra := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-new"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: dra.slices.slices[0].Spec.Driver, NodeName: ptr.To("node-00000"), Pool: resourceapi.ResourcePool{Name: "node-new", ResourceSliceCount: 1},
		Devices: dra.slices.slices[0].Spec.Devices}}
	dra.slices.slices = append(append([]*resourceapi.ResourceSlice(nil), dra.slices.slices...), extra)
	w.pl.dra = dra
	got := w.attempt(t)
	t.Logf("first: %s\nafter new slices: %s", first.Message, got.Message)
	if counted() != 5 || !strings.Contains(got.Message, "(node-00000: 16)") {
		t.Fatalf("after new slices: counted %d (want 5), message %q", counted(), got.Message)
	}

	// Without WaitReason's PreFilter (a profile that does not run it),
	// nothing is reused.
	for range 2 {
		if _, err := w.pl.classify(t.Context(), framework.NewCycleState(), w.pod, w.statuses); err != nil {
			t.Fatal(err)
		}
	}
	if counted() != 7 {
		t.Fatalf("without PreFilter: counted %d, want 7", counted())
	}
}

// entryHash is FNV-1a: the digest of an attempt matches hash/fnv's.
func TestEntryHashIsFNV1a(t *testing.T) {
	h := fnv.New64a()
	h.Write([]byte("r\x00node-1\x00NodeAffinity: no\x00"))
	if got, want := entryHash("r", "node-1", "NodeAffinity: no"), h.Sum64(); got != want {
		t.Errorf("entryHash = %x, want %x", got, want)
	}
}
