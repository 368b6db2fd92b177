package evictor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

var t0 = time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)

// reason is the victim's story the Events tell, for the fixture's victim.
const reason = "reclaimed for tenant team-a's guarantee: team-a holds 0 of its 8 guaranteed H100 and its gang train needs 4; " +
	"team-b holds 16 with 8 guaranteed, 8 borrowed; this pod gives back 4"

func victim() Victim {
	return Victim{
		Pod: types.NamespacedName{Namespace: "team-b", Name: "batch-0"}, UID: "uid-1", Tenant: "team-b",
		For: Reclaimer{Tenant: "team-a", Gang: "train", Pod: types.NamespacedName{Namespace: "team-a", Name: "train-0"}},
		Numbers: Numbers{Model: "H100", Taken: 4, ReclaimerHolds: 0, ReclaimerGuarantee: 8, ReclaimerNeeds: 4,
			VictimHolds: 16, VictimGuarantee: 8},
	}
}

func victimPod(checkpoint string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "batch-0", UID: "uid-1"},
		Status: v1.PodStatus{PodIP: "127.0.0.1", Phase: v1.PodRunning}}
	if checkpoint != "" {
		p.Annotations = map[string]string{gpuv1.CheckpointAnnotation: checkpoint}
	}
	return p
}

// fixture is an Evictor over a fake clientset whose eviction subresource
// answers from evictAnswers (nil: accepted) in turn, the last one again
// once they run out.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	recorder *events.FakeRecorder
	clock    *clocktesting.FakeClock
	registry metrics.KubeRegistry
	ev       *Evictor

	mu        sync.Mutex
	answers   []error
	evictions []*policyv1.Eviction
}

func newFixture(t *testing.T, answers []error, objs ...runtime.Object) *fixture {
	return newFixtureWith(t, nil, answers, objs...)
}

// newFixtureWith is newFixture with options changed by opts.
func newFixtureWith(t *testing.T, opts func(*Options), answers []error, objs ...runtime.Object) *fixture {
	f := &fixture{t: t, client: fake.NewClientset(objs...), recorder: events.NewFakeRecorder(100),
		clock: clocktesting.NewFakeClock(t0), registry: metrics.NewKubeRegistry(), answers: answers}
	f.client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.evictions = append(f.evictions, a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction))
		var err error
		if len(f.answers) > 0 {
			err = f.answers[0]
			if len(f.answers) > 1 {
				f.answers = f.answers[1:]
			}
		}
		return true, nil, err
	})
	o := Options{Client: f.client, Recorder: f.recorder, Clock: f.clock, Registry: f.registry,
		Retry: Retry{Initial: time.Second, Max: 4 * time.Second, Tries: 4}}
	if opts != nil {
		opts(&o)
	}
	ev, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.ev = ev
	return f
}

// start runs Evict in the background; wait for its answer.
func (f *fixture) start(v Victim) (wait func() (Result, error)) {
	type answer struct {
		r   Result
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		r, err := f.ev.Evict(f.t.Context(), v)
		ch <- answer{r, err}
	}()
	return func() (Result, error) {
		select {
		case a := <-ch:
			return a.r, a.err
		case <-time.After(time.Minute):
			f.t.Fatal("Evict did not return")
			return Result{}, nil
		}
	}
}

// until waits (in real time, only to let the evictor's goroutine get
// there) for cond.
func (f *fixture) until(what string, cond func() bool) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.t.Context(), time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		f.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Timers the evictor waits on: the grace and the next poll while it waits
// for a checkpoint; the next try while it retries an eviction.
const (
	checkpointTimers = 2
	retryTimers      = 1
)

// step moves the clock by d once the evictor waits on its timers.
func (f *fixture) step(timers int, d time.Duration) {
	f.t.Helper()
	f.until(fmt.Sprintf("the evictor to wait on %d timers", timers), func() bool { return f.clock.Waiters() == timers })
	f.clock.Step(d)
}

// events drains the recorded Events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) evictionCalls() []*policyv1.Eviction {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*policyv1.Eviction(nil), f.evictions...)
}

// patches are the pod patches sent, as "type body".
func (f *fixture) patches() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "pods" {
			out = append(out, fmt.Sprintf("%s %s", p.GetPatchType(), p.GetPatch()))
		}
	}
	return out
}

// checkMetrics compares the counters with want (checkpoint outcomes, then
// eviction results).
func (f *fixture) checkMetrics(checkpoints, evictions map[string]int) {
	f.t.Helper()
	var b strings.Builder
	if len(checkpoints) > 0 {
		b.WriteString("# HELP rota_reclaim_checkpoints_total [ALPHA] Checkpoints of pods evicted for a reclaim, by outcome: acknowledged, grace_expired, undeclared (the pod declares no checkpoint) or invalid (a declaration that does not parse).\n# TYPE rota_reclaim_checkpoints_total counter\n")
		for _, o := range []string{"acknowledged", "grace_expired", "invalid", "undeclared"} {
			if n, ok := checkpoints[o]; ok {
				fmt.Fprintf(&b, "rota_reclaim_checkpoints_total{outcome=%q} %d\n", o, n)
			}
		}
	}
	if len(evictions) > 0 {
		b.WriteString("# HELP rota_reclaim_evictions_total [ALPHA] Evictions for a reclaim, by result: evicted, pdb_blocked (a PodDisruptionBudget refused every try), gone (the pod was gone, replaced or terminating) or error.\n# TYPE rota_reclaim_evictions_total counter\n")
		for _, r := range []string{"error", "evicted", "gone", "pdb_blocked"} {
			if n, ok := evictions[r]; ok {
				fmt.Fprintf(&b, "rota_reclaim_evictions_total{result=%q} %d\n", r, n)
			}
		}
	}
	if err := testutil.GatherAndCompare(f.registry, strings.NewReader(b.String()),
		"rota_reclaim_checkpoints_total", "rota_reclaim_evictions_total"); err != nil {
		f.t.Error(err)
	}
}

// checkEvicted: exactly one Eviction was sent for the victim, with its
// UID as a precondition.
func (f *fixture) checkEvicted(calls int) {
	f.t.Helper()
	got := f.evictionCalls()
	if len(got) != calls {
		f.t.Fatalf("%d evictions sent, want %d", len(got), calls)
	}
	for _, e := range got {
		if e.Namespace != "team-b" || e.Name != "batch-0" || e.DeleteOptions == nil || e.DeleteOptions.Preconditions == nil ||
			e.DeleteOptions.Preconditions.UID == nil || *e.DeleteOptions.Preconditions.UID != "uid-1" {
			f.t.Errorf("eviction %+v does not name team-b/batch-0 with the UID precondition uid-1", e)
		}
	}
}

func (f *fixture) checkEvents(want ...string) {
	f.t.Helper()
	if diff := cmp.Diff(want, f.events()); diff != "" {
		f.t.Errorf("events (-want +got):\n%s", diff)
	}
}

const requestPatch = `application/merge-patch+json {"metadata":{"annotations":{"rota.dev/checkpoint-requested":"2026-12-06T05:00:00Z"},"uid":"uid-1"}}`

func TestEvictHTTPAcknowledged(t *testing.T) {
	srv := newCheckpointServer(t, http.StatusOK)
	decl := fmt.Sprintf("grace=90s,http=%d/checkpoint", srv.port(t))
	f := newFixture(t, nil, victimPod(decl))
	res, err := f.start(victim())()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: Acknowledged, Eviction: Evicted}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	ep := fmt.Sprintf("%d/checkpoint", srv.port(t))
	f.checkEvents(
		"Normal Reclaiming "+reason+"; asking it to checkpoint within 1m30s (annotation rota.dev/checkpoint-requested, POST to port "+ep+")",
		"Normal Checkpoint acknowledged after 0s (POST to port "+ep+")",
		"Normal Reclaimed evicted: "+reason,
	)
	if diff := cmp.Diff([]string{requestPatch}, f.patches()); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}
	wantReq := []recordedRequest{{Method: http.MethodPost, Path: "/checkpoint", ContentType: "application/json",
		Body: CheckpointRequest{Requested: "2026-12-06T05:00:00Z", Deadline: "2026-12-06T05:01:30Z", Tenant: "team-a"}}}
	if diff := cmp.Diff(wantReq, srv.Requests()); diff != "" {
		t.Errorf("checkpoint requests (-want +got):\n%s", diff)
	}
	f.checkEvicted(1)
	f.checkMetrics(map[string]int{"acknowledged": 1}, map[string]int{"evicted": 1})
	if got := f.ev.InProgress(); len(got) != 0 {
		t.Errorf("InProgress after the end = %+v", got)
	}
}

func TestEvictAnnotationAcknowledged(t *testing.T) {
	f := newFixture(t, nil, victimPod("grace=90s"))
	done := f.start(victim())
	f.until("the checkpoint to be requested", func() bool {
		s := f.ev.InProgress()
		return len(s) == 1 && s[0].Phase == Checkpointing
	})
	s := f.ev.InProgress()[0]
	if s.Requested != t0 || s.Deadline != t0.Add(90*time.Second) || s.GraceLeft(t0.Add(30*time.Second)) != time.Minute ||
		s.Tenant != "team-b" || s.For.Tenant != "team-a" || s.Pod.Name != "batch-0" {
		t.Errorf("status while checkpointing = %+v", s)
	}

	// No acknowledgement yet: a poll finds none.
	f.step(checkpointTimers, 2*time.Second)
	f.until("the poll to be done", func() bool { return f.clock.Waiters() == checkpointTimers })
	// The workload acknowledges.
	pods := f.client.CoreV1().Pods("team-b")
	p, err := pods.Get(t.Context(), "batch-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations[gpuv1.CheckpointRequestedAnnotation]; got != "2026-12-06T05:00:00Z" {
		t.Fatalf("requested annotation = %q", got)
	}
	p.Annotations[gpuv1.CheckpointedAnnotation] = p.Annotations[gpuv1.CheckpointRequestedAnnotation]
	if _, err := pods.Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.step(checkpointTimers, 2*time.Second)

	res, err := done()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: Acknowledged, Eviction: Evicted, Waited: 4 * time.Second}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	f.checkEvents(
		"Normal Reclaiming "+reason+"; asking it to checkpoint within 1m30s (annotation rota.dev/checkpoint-requested)",
		"Normal Checkpoint acknowledged after 4s (annotation rota.dev/checkpointed)",
		"Normal Reclaimed evicted: "+reason,
	)
	if diff := cmp.Diff([]string{requestPatch}, f.patches()); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}
	f.checkEvicted(1)
	f.checkMetrics(map[string]int{"acknowledged": 1}, map[string]int{"evicted": 1})
}

// TestEvictAcknowledgedInLister: with a lister the wait reads the pod
// from it, not from the API server.
func TestEvictAcknowledgedInLister(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	f := newFixtureWith(t, func(o *Options) { o.Pods = corelisters.NewPodLister(indexer); o.Poll = 5 * time.Second },
		nil, victimPod("grace=90s"))
	done := f.start(victim())
	f.until("the checkpoint to be requested", func() bool {
		s := f.ev.InProgress()
		return len(s) == 1 && s[0].Phase == Checkpointing
	})
	acked := victimPod("grace=90s")
	acked.Annotations[gpuv1.CheckpointRequestedAnnotation] = "2026-12-06T05:00:00Z"
	acked.Annotations[gpuv1.CheckpointedAnnotation] = "2026-12-06T05:00:00Z"
	if err := indexer.Add(acked); err != nil {
		t.Fatal(err)
	}
	gets := len(f.client.Actions())
	f.step(checkpointTimers, 5*time.Second)
	res, err := done()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: Acknowledged, Eviction: Evicted, Waited: 5 * time.Second}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	for _, a := range f.client.Actions()[gets:] {
		if a.GetVerb() == "get" {
			t.Errorf("the wait read the API server: %v", a)
		}
	}
	f.checkMetrics(map[string]int{"acknowledged": 1}, map[string]int{"evicted": 1})
}

func TestEvictGraceExpires(t *testing.T) {
	f := newFixture(t, nil, victimPod("grace=90s"))
	done := f.start(victim())
	f.step(checkpointTimers, 90*time.Second)
	res, err := done()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: GraceExpired, Eviction: Evicted, Waited: 90 * time.Second}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	f.checkEvents(
		"Normal Reclaiming "+reason+"; asking it to checkpoint within 1m30s (annotation rota.dev/checkpoint-requested)",
		"Warning Checkpoint no acknowledgement within grace 1m30s; evicting",
		"Normal Reclaimed evicted: "+reason,
	)
	f.checkEvicted(1)
	f.checkMetrics(map[string]int{"grace_expired": 1}, map[string]int{"evicted": 1})
}

// TestEvictGraceExpiresAfterFailedPOST: a POST that fails leaves the
// annotation to acknowledge; the grace Event says why the POST failed.
func TestEvictGraceExpiresAfterFailedPOST(t *testing.T) {
	srv := newCheckpointServer(t, http.StatusServiceUnavailable)
	f := newFixture(t, nil, victimPod(fmt.Sprintf("grace=1m,http=%d/checkpoint", srv.port(t))))
	done := f.start(victim())
	f.until("the POST to fail", func() bool {
		s := f.ev.InProgress()
		return len(s) == 1 && s[0].NotifyError != ""
	})
	f.step(checkpointTimers, time.Minute)
	res, err := done()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: GraceExpired, Eviction: Evicted, Waited: time.Minute}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	evs := f.events()
	want := fmt.Sprintf("Warning Checkpoint no acknowledgement within grace 1m0s (POST %s/checkpoint answered 503 Service Unavailable); evicting", srv.URL)
	if len(evs) != 3 || evs[1] != want {
		t.Errorf("events = %q, want the second %q", evs, want)
	}
	f.checkMetrics(map[string]int{"grace_expired": 1}, map[string]int{"evicted": 1})
}

func TestEvictUndeclared(t *testing.T) {
	f := newFixture(t, nil, victimPod(""))
	res, err := f.start(victim())()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: Undeclared, Eviction: Evicted}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	f.checkEvents(
		"Normal Reclaiming "+reason+"; it declares no checkpoint (rota.dev/checkpoint), evicting now",
		"Normal Reclaimed evicted: "+reason,
	)
	if got := f.patches(); len(got) != 0 {
		t.Errorf("patches = %q, want none", got)
	}
	f.checkEvicted(1)
	f.checkMetrics(map[string]int{"undeclared": 1}, map[string]int{"evicted": 1})
}

func TestEvictInvalidDeclaration(t *testing.T) {
	f := newFixture(t, nil, victimPod("grace=2h,http=8080/checkpoint"))
	res, err := f.start(victim())()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: Invalid, Eviction: Evicted}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	f.checkEvents(
		"Normal Reclaiming "+reason+"; its checkpoint declaration is invalid, evicting without a checkpoint",
		"Warning Checkpoint annotation rota.dev/checkpoint: grace: 2h0m0s is more than 1h0m0s; evicting without a checkpoint",
		"Normal Reclaimed evicted: "+reason,
	)
	if got := f.patches(); len(got) != 0 {
		t.Errorf("patches = %q, want none", got)
	}
	f.checkEvicted(1)
	f.checkMetrics(map[string]int{"invalid": 1}, map[string]int{"evicted": 1})
}

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
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: Undeclared, Eviction: Evicted}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: Undeclared, Eviction: PDBBlocked}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
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
	f.until("the checkpoint to be requested", func() bool {
		s := f.ev.InProgress()
		return len(s) == 1 && s[0].Phase == Checkpointing
	})
	if err := f.client.CoreV1().Pods("team-b").Delete(t.Context(), "batch-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.step(checkpointTimers, 2*time.Second)
	res, err := done()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Eviction: Gone}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Checkpoint: GraceExpired, Eviction: Evicted, Waited: 90 * time.Second}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
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
