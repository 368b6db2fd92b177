package reservation

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/plugins/refusalmemo"
)

// loadGate holds the pods refused because the plugin's own caches
// (GPUReservations, LeaderWorkerSets) had not synced yet, and activates
// them once the caches have. Those caches are the plugin's, not the
// scheduler's: their first sync is no cluster event the scheduler sees, so
// without the gate such a pod would wait for an unrelated event or the
// periodic flush of unschedulable pods.
type loadGate struct {
	activator refusalmemo.Activator

	mu      sync.Mutex
	loaded  bool
	waiting map[string]*v1.Pod
}

// newLoadGate returns a gate that opens when every synced reports true
// (polled until ctx ends). Without an activator the gate only records.
func newLoadGate(ctx context.Context, a refusalmemo.Activator, synced ...cache.InformerSynced) *loadGate {
	g := &loadGate{activator: a, waiting: map[string]*v1.Pod{}}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			g.open(ctx)
		}
	}()
	return g
}

// wait records that pod is refused until the caches have synced. It
// returns false when they have synced in the meantime: the caller must
// then decide again instead of refusing. A pod recorded here is activated
// by open, so no refusal of this kind outlives the first sync.
func (g *loadGate) wait(pod *v1.Pod) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.loaded {
		return false
	}
	g.waiting[pod.Namespace+"/"+pod.Name] = pod
	return true
}

// open marks the caches synced and activates every pod refused before.
func (g *loadGate) open(ctx context.Context) {
	g.mu.Lock()
	g.loaded = true
	pods := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	if len(pods) == 0 || g.activator == nil {
		return
	}
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Reservation caches synced; retrying the pods refused before", "pods", len(pods))
	// A pod still in its scheduling cycle is recorded by the queue and
	// requeued when that cycle ends.
	g.activator.Activate(logger, pods)
}
