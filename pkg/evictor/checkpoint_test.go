package evictor

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

func TestEvictHTTPAcknowledged(t *testing.T) {
	srv := newCheckpointServer(t, http.StatusOK)
	decl := fmt.Sprintf("grace=90s,http=%d/checkpoint", srv.port(t))
	f := newFixture(t, nil, victimPod(decl))
	res, err := f.start(victim())()
	f.checkResult(res, err, Result{Checkpoint: Acknowledged, Eviction: Evicted})
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
	f.untilCheckpointing()
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
	f.checkResult(res, err, Result{Checkpoint: Acknowledged, Eviction: Evicted, Waited: 4 * time.Second})
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
	f.untilCheckpointing()
	acked := victimPod("grace=90s")
	acked.Annotations[gpuv1.CheckpointRequestedAnnotation] = "2026-12-06T05:00:00Z"
	acked.Annotations[gpuv1.CheckpointedAnnotation] = "2026-12-06T05:00:00Z"
	if err := indexer.Add(acked); err != nil {
		t.Fatal(err)
	}
	gets := len(f.client.Actions())
	f.step(checkpointTimers, 5*time.Second)
	res, err := done()
	f.checkResult(res, err, Result{Checkpoint: Acknowledged, Eviction: Evicted, Waited: 5 * time.Second})
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
	f.checkResult(res, err, Result{Checkpoint: GraceExpired, Eviction: Evicted, Waited: 90 * time.Second})
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
	f.checkResult(res, err, Result{Checkpoint: GraceExpired, Eviction: Evicted, Waited: time.Minute})
	evs := f.events()
	want := fmt.Sprintf("Warning Checkpoint no acknowledgement within grace 1m0s (POST %s/checkpoint answered 503 Service Unavailable); evicting", srv.URL)
	if len(evs) != 3 || evs[1] != want {
		t.Errorf("events = %q, want the second %q", evs, want)
	}
	f.checkMetrics(map[string]int{"grace_expired": 1}, map[string]int{"evicted": 1})
}

// TestEvictWithoutCheckpoint: a pod that declares no checkpoint, or
// declares one Rota cannot honour, is evicted at once, and no patch asks it
// for a checkpoint.
func TestEvictWithoutCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotation  string
		checkpoint  CheckpointOutcome
		events      []string
		metricLabel string
	}{{
		name:       "undeclared",
		checkpoint: Undeclared,
		events: []string{
			"Normal Reclaiming " + reason + "; it declares no checkpoint (rota.dev/checkpoint), evicting now",
			"Normal Reclaimed evicted: " + reason,
		},
		metricLabel: "undeclared",
	}, {
		name:       "invalid declaration",
		annotation: "grace=2h,http=8080/checkpoint",
		checkpoint: Invalid,
		events: []string{
			"Normal Reclaiming " + reason + "; its checkpoint declaration is invalid, evicting without a checkpoint",
			"Warning Checkpoint annotation rota.dev/checkpoint: grace: 2h0m0s is more than 1h0m0s; evicting without a checkpoint",
			"Normal Reclaimed evicted: " + reason,
		},
		metricLabel: "invalid",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, victimPod(tc.annotation))
			res, err := f.start(victim())()
			f.checkResult(res, err, Result{Checkpoint: tc.checkpoint, Eviction: Evicted})
			f.checkEvents(tc.events...)
			if got := f.patches(); len(got) != 0 {
				t.Errorf("patches = %q, want none", got)
			}
			f.checkEvicted(1)
			f.checkMetrics(map[string]int{tc.metricLabel: 1}, map[string]int{"evicted": 1})
		})
	}
}
