package evictor

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// pdbRefusal is the API server's answer to an eviction a
// PodDisruptionBudget forbids.
func pdbRefusal() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget batch needs 2 healthy pods and has 2 currently"})
	return err
}

func TestEvictPDBRefusesThenAllows(t *testing.T) {
	f := newFixture(t, []error{pdbRefusal(), pdbRefusal(), nil}, victimPod(""))
	done := f.start(victim())
	f.step(retryTimers, time.Second)
	f.until("the second refusal", func() bool {
		s := f.ev.InProgress()
		return len(s) == 1 && s[0].Phase == Evicting && s[0].Refusals == 2
	})
	f.step(retryTimers, 2*time.Second)
	res, err := done()
	f.checkResult(res, err, Result{Checkpoint: Undeclared, Eviction: Evicted})
	f.checkEvents(
		"Normal Reclaiming "+reason+"; it declares no checkpoint (rota.dev/checkpoint), evicting now",
		"Normal Reclaimed evicted: "+reason,
	)
	f.checkEvicted(3)
	f.checkMetrics(map[string]int{"undeclared": 1}, map[string]int{"evicted": 1})
}

func TestEvictPDBBlocked(t *testing.T) {
	f := newFixture(t, []error{pdbRefusal()}, victimPod(""))
	done := f.start(victim())
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		f.step(retryTimers, d)
	}
	res, err := done()
	f.checkResult(res, err, Result{Checkpoint: Undeclared, Eviction: PDBBlocked})
	f.checkEvents(
		"Normal Reclaiming "+reason+"; it declares no checkpoint (rota.dev/checkpoint), evicting now",
		"Warning ReclaimBlocked eviction refused 4 times, last: The disruption budget batch needs 2 healthy pods and has 2 currently; the pod keeps running ("+reason+")",
	)
	f.checkEvicted(4)
	f.checkMetrics(map[string]int{"undeclared": 1}, map[string]int{"pdb_blocked": 1})
}

func TestEvictGone(t *testing.T) {
	replaced := victimPod("")
	replaced.UID = "uid-2"
	terminating := victimPod("grace=90s")
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		answers []error
		// evictions sent and the checkpoint outcome
		calls      int
		checkpoint CheckpointOutcome
		events     int
	}{
		{name: "no pod"},
		{name: "replaced", objs: []runtime.Object{replaced}},
		{name: "terminating", objs: []runtime.Object{terminating}},
		{name: "gone before the eviction", objs: []runtime.Object{victimPod("")}, answers: []error{apierrors.NewNotFound(v1.Resource("pods"), "batch-0")},
			calls: 1, checkpoint: Undeclared, events: 1},
		{name: "replaced before the eviction", objs: []runtime.Object{victimPod("")},
			answers: []error{apierrors.NewConflict(v1.Resource("pods"), "batch-0", errors.New("Precondition failed: UID in precondition: uid-1, UID in object meta: uid-2"))},
			calls:   1, checkpoint: Undeclared, events: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.answers, tc.objs...)
			res, err := f.start(victim())()
			if err != nil {
				t.Fatal(err)
			}
			if want := (Result{Checkpoint: tc.checkpoint, Eviction: Gone}); res != want {
				t.Errorf("result = %+v, want %+v", res, want)
			}
			if evs := f.events(); len(evs) != tc.events {
				t.Errorf("events = %q, want %d", evs, tc.events)
			}
			f.checkEvicted(tc.calls)
			if got := f.patches(); len(got) != 0 {
				t.Errorf("patches = %q, want none", got)
			}
			checkpoints := map[string]int{}
			if tc.checkpoint != "" {
				checkpoints[string(tc.checkpoint)] = 1
			}
			f.checkMetrics(checkpoints, map[string]int{"gone": 1})
		})
	}
}

// TestEvictGoneDuringCheckpoint: a pod deleted while Rota waits for its
// acknowledgement is not evicted.
func TestEvictGoneDuringCheckpoint(t *testing.T) {
	f := newFixture(t, nil, victimPod("grace=90s"))
	done := f.start(victim())
	f.untilCheckpointing()
	if err := f.client.CoreV1().Pods("team-b").Delete(t.Context(), "batch-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.step(checkpointTimers, 2*time.Second)
	res, err := done()
	f.checkResult(res, err, Result{Eviction: Gone})
	f.checkEvicted(0)
	f.checkMetrics(nil, map[string]int{"gone": 1})
}

// TestEvictResumesRequest: a request an earlier run made is resumed, not
// made again, and its grace counts from then.
func TestEvictResumesRequest(t *testing.T) {
	p := victimPod("grace=90s")
	p.Annotations[gpuv1.CheckpointRequestedAnnotation] = t0.Add(-80 * time.Second).Format(time.RFC3339)
	f := newFixture(t, nil, p)
	done := f.start(victim())
	f.step(checkpointTimers, 10*time.Second)
	res, err := done()
	f.checkResult(res, err, Result{Checkpoint: GraceExpired, Eviction: Evicted, Waited: 90 * time.Second})
	if got := f.patches(); len(got) != 0 {
		t.Errorf("patches = %q, want none", got)
	}
}

// TestSubmit: the workers carry submitted victims out; a victim in
// progress is taken once.
func TestSubmit(t *testing.T) {
	f := newFixture(t, nil, victimPod("grace=90s"))
	if n := f.ev.Submit([]Victim{victim(), victim(), {Pod: types.NamespacedName{Namespace: "x", Name: "no-uid"}}}); n != 1 {
		t.Errorf("Submit queued %d victims, want 1", n)
	}
	if s := f.ev.InProgress(); len(s) != 1 || s[0].Phase != Queued || s[0].Submitted != t0 {
		t.Errorf("InProgress before Run = %+v", s)
	}
	if _, err := f.ev.Evict(t.Context(), victim()); !errors.Is(err, ErrInProgress) {
		t.Errorf("Evict of a victim in progress = %v, want ErrInProgress", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.ev.Run(ctx, 2)
	f.step(checkpointTimers, 90*time.Second)
	f.until("the victim to be done", func() bool { return len(f.ev.InProgress()) == 0 })
	if n := f.ev.Submit([]Victim{victim()}); n != 1 {
		t.Errorf("Submit after the end queued %d, want 1 (a later reclaim may take it again)", n)
	}
	f.step(checkpointTimers, 90*time.Second)
	f.until("the victim to be done again", func() bool { return len(f.ev.InProgress()) == 0 })
	f.checkEvicted(2)
}

func TestVictimReason(t *testing.T) {
	v := victim()
	v.Numbers.Taken = 0
	v.For.Gang = ""
	want := "reclaimed for tenant team-a's guarantee: team-a holds 0 of its 8 guaranteed H100 and its pod train-0 needs 4; team-b holds 16 with 8 guaranteed, 8 borrowed"
	if got := v.Reason(); got != want {
		t.Errorf("Reason() = %q, want %q", got, want)
	}
}
