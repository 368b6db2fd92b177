package reservation

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

type recordingActivator struct {
	mu        sync.Mutex
	activated map[string]bool
	done      chan struct{}
}

func (a *recordingActivator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.activated[k] = true
	}
	close(a.done)
}

// A pod refused while the plugin's caches sync is retried when they have
// synced, with no cluster event; once synced, nothing is refused as "not
// loaded" any more.
func TestPodsRefusedBeforeTheCachesSyncAreRetried(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var synced atomic.Bool
	a := &recordingActivator{activated: map[string]bool{}, done: make(chan struct{})}
	g := newLoadGate(ctx, a, synced.Load)

	pod := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
	}
	for _, name := range []string{"llm-0", "llm-1"} {
		if !g.wait(pod(name)) {
			t.Fatalf("wait(%s) before the sync = false, want the pod refused", name)
		}
	}
	synced.Store(true)
	select {
	case <-a.done:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Minute):
		t.Fatal("the pods refused before the sync were never activated")
	}
	a.mu.Lock()
	if !a.activated["team-a/llm-0"] || !a.activated["team-a/llm-1"] || len(a.activated) != 2 {
		t.Errorf("activated %v, want team-a/llm-0 and team-a/llm-1", a.activated)
	}
	a.mu.Unlock()
	if g.wait(pod("llm-2")) {
		t.Error("wait after the sync = true: a pod would be refused as not loaded with nothing left to retry it")
	}
}
