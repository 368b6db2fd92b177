package evictor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultPoll is how often the evictor looks for a pod's acknowledgement
// annotation by default.
const DefaultPoll = 2 * time.Second

// Retry bounds the evictions retried while the API server refuses them
// with 429 (a PodDisruptionBudget): the wait doubles from Initial up to
// Max between tries, and Tries tries are made in all.
type Retry struct {
	Initial, Max time.Duration
	Tries        int
}

// DefaultRetry tries 8 times over about 1m30s.
func DefaultRetry() Retry { return Retry{Initial: time.Second, Max: 30 * time.Second, Tries: 8} }

// Options configure an Evictor.
type Options struct {
	// Client reads and patches pods and sends Evictions.
	Client kubernetes.Interface
	// Recorder records the Events on the victims (the scheduler's events/v1
	// recorder).
	Recorder events.EventRecorder
	// Clock times the grace, the polls and the retries.
	Clock clock.WithTicker
	// Registry receives the metrics (nil: a registry of their own).
	Registry metrics.KubeRegistry
	// Metrics, when set, are the metrics to count in instead (shared by
	// every evictor of the process; Registry is then unused).
	Metrics *Metrics
	// Notifier sends the HTTP POST of a pod that declares one (nil:
	// HTTPNotifier{}).
	Notifier Notifier
	// Pods, when set, is where the wait for an acknowledgement reads the
	// pod (the scheduler's informer); nil: a GET per poll.
	Pods corelisters.PodLister
	// Poll is how often that wait reads the pod (0: DefaultPoll).
	Poll time.Duration
	// Retry bounds the evictions a PodDisruptionBudget refuses (zero:
	// DefaultRetry).
	Retry Retry
}

// Evictor evicts reclaim victims, each after its checkpoint. Evict runs
// one victim to the end; Submit queues victims for the workers Run starts.
// A victim is taken once while in progress (by UID).
type Evictor struct {
	client   kubernetes.Interface
	recorder events.EventRecorder
	clock    clock.WithTicker
	notifier Notifier
	pods     corelisters.PodLister
	poll     time.Duration
	retry    Retry
	metrics  *Metrics
	queue    workqueue.TypedInterface[types.UID]

	mu sync.Mutex
	// active holds every victim taken and not finished, by UID.
	active map[types.UID]*entry
}

type entry struct {
	victim Victim
	status Status
}

// ErrInProgress is Evict's answer for a victim already in progress.
var ErrInProgress = errors.New("victim already in progress")

// New returns an Evictor; its metrics are registered in o.Registry.
func New(o Options) (*Evictor, error) {
	switch {
	case o.Client == nil:
		return nil, errors.New("evictor: no client")
	case o.Recorder == nil:
		return nil, errors.New("evictor: no event recorder")
	case o.Clock == nil:
		return nil, errors.New("evictor: no clock")
	}
	if o.Notifier == nil {
		o.Notifier = HTTPNotifier{}
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Retry.Tries <= 0 {
		o.Retry = DefaultRetry()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(o.Registry)
	}
	return &Evictor{
		client: o.Client, recorder: o.Recorder, clock: o.Clock, notifier: o.Notifier, pods: o.Pods,
		poll: o.Poll, retry: o.Retry, metrics: o.Metrics,
		queue:  workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[types.UID]{Name: "rota_reclaim_evictions"}),
		active: map[types.UID]*entry{},
	}, nil
}

// take records v as in progress; false when it already is.
func (e *Evictor) take(v Victim) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.active[v.UID]; ok {
		return false
	}
	e.active[v.UID] = &entry{victim: v, status: Status{Pod: v.Pod, UID: v.UID, Tenant: v.Tenant, For: v.For,
		Phase: Queued, Submitted: e.clock.Now()}}
	return true
}

func (e *Evictor) release(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.active, uid)
}

// update changes the status of the victim uid in progress.
func (e *Evictor) update(uid types.UID, change func(*Status)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if en, ok := e.active[uid]; ok {
		change(&en.status)
	}
}

// Submit queues the victims not already in progress for the workers Run
// starts and returns how many it queued. A victim without a UID is
// dropped.
func (e *Evictor) Submit(victims []Victim) int {
	n := 0
	for _, v := range victims {
		if v.UID == "" || !e.take(v) {
			continue
		}
		e.queue.Add(v.UID)
		n++
	}
	return n
}

// Run starts workers that take submitted victims until ctx ends.
func (e *Evictor) Run(ctx context.Context, workers int) {
	for range workers {
		go func() {
			for e.processNext(ctx) {
			}
		}()
	}
	go func() {
		<-ctx.Done()
		e.queue.ShutDown()
	}()
}

func (e *Evictor) processNext(ctx context.Context) bool {
	uid, quit := e.queue.Get()
	if quit {
		return false
	}
	defer e.queue.Done(uid)
	e.mu.Lock()
	en, ok := e.active[uid]
	e.mu.Unlock()
	if !ok {
		return true
	}
	defer e.release(uid)
	if _, err := e.reclaim(ctx, en.victim); err != nil {
		klog.FromContext(ctx).Error(err, "Reclaim eviction failed", "pod", klog.KRef(en.victim.Pod.Namespace, en.victim.Pod.Name))
	}
	return true
}

// Result is what became of one victim.
type Result struct {
	// Checkpoint is "" when the pod was gone before Rota read its
	// declaration, or went during the checkpoint.
	Checkpoint CheckpointOutcome
	Eviction   EvictionResult
	// Waited is how long the checkpoint took (0 without one).
	Waited time.Duration
}

// Evict runs one victim to the end: the Reclaiming Event, the checkpoint
// when declared, the eviction. It returns ErrInProgress for a victim
// already in progress (by Evict or Submit), and an error with the result
// Error or when ctx ends.
func (e *Evictor) Evict(ctx context.Context, v Victim) (Result, error) {
	if v.UID == "" {
		return Result{}, fmt.Errorf("victim %s has no UID", v.Pod)
	}
	if !e.take(v) {
		return Result{}, fmt.Errorf("victim %s (UID %s): %w", v.Pod, v.UID, ErrInProgress)
	}
	defer e.release(v.UID)
	return e.reclaim(ctx, v)
}

// InProgress lists the victims taken and not finished, by namespace and
// name.
func (e *Evictor) InProgress() []Status {
	e.mu.Lock()
	out := make([]Status, 0, len(e.active))
	for _, en := range e.active {
		out = append(out, en.status)
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(cmp.Compare(a.Pod.Namespace, b.Pod.Namespace), cmp.Compare(a.Pod.Name, b.Pod.Name), cmp.Compare(a.UID, b.UID))
	})
	return out
}
