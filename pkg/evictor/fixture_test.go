package evictor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
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

// untilCheckpointing waits until the one eviction in progress has asked its
// pod for a checkpoint.
func (f *fixture) untilCheckpointing() {
	f.t.Helper()
	f.until("the checkpoint to be requested", func() bool {
		s := f.ev.InProgress()
		return len(s) == 1 && s[0].Phase == Checkpointing
	})
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

// checkResult fails the test on err, and reports a result other than want.
func (f *fixture) checkResult(res Result, err error, want Result) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
	if res != want {
		f.t.Errorf("result = %+v, want %+v", res, want)
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
