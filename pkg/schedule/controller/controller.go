package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// workloadIndex indexes schedules by the workloads they name, for ownership.
const workloadIndex = "workload"

// Controller reconciles DeploySchedules.
type Controller struct {
	opts      Options
	schedules schedules
	previewer *preview.Previewer
	metrics   *controllerMetrics
	informer  cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	compiled map[types.UID]compiledSchedule
}

type compiledSchedule struct {
	generation int64
	schedule   *schedule.Schedule
}

// New returns a controller; Run starts it, Reconcile runs one pass.
func New(opts Options) (*Controller, error) {
	if err := opts.defaultAndValidate(); err != nil {
		return nil, err
	}
	c := &Controller{
		opts:      opts,
		schedules: schedules{dyn: opts.Dynamic},
		previewer: preview.New(),
		metrics:   newMetrics(opts.Registry),
		compiled:  map[types.UID]compiledSchedule{},
	}
	// The list-watch follows the client: a real apiserver streams the initial
	// list (WatchList), a fake client lists then watches.
	c.informer = newScheduleInformer(cache.ToListWatcherWithWatchListSemantics(c.schedules.listWatch(), opts.Dynamic))
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployschedule", Clock: opts.Clock})
	if _, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: func(obj any) {
			if ds, ok := obj.(*v1alpha1.DeploySchedule); ok {
				c.forget(ds.UID)
			}
			c.enqueue(obj)
		},
	}); err != nil {
		return nil, fmt.Errorf("add DeploySchedule handler: %w", err)
	}
	return c, nil
}

// newScheduleInformer watches DeploySchedules, indexed by the workloads they name.
func newScheduleInformer(lw cache.ListerWatcher) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(lw, &v1alpha1.DeploySchedule{}, 0, cache.Indexers{
		workloadIndex: func(obj any) ([]string, error) {
			ds, ok := obj.(*v1alpha1.DeploySchedule)
			if !ok {
				return nil, nil
			}
			keys := make([]string, 0, len(ds.Spec.Targets))
			for _, t := range ds.Spec.Targets {
				keys = append(keys, workloadKey(ds.Namespace, t.WorkloadRef))
			}
			return keys, nil
		},
	})
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// Run starts the informer and workers and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Starting DeploySchedule controller", "workers", workers)
	go c.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	logger.Info("Stopped DeploySchedule controller")
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		c.queue.Forget(key)
		return true
	}
	requeue, err := c.Reconcile(ctx, namespace, name)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reconcile failed", "deploySchedule", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	if requeue > 0 {
		c.queue.AddAfter(key, requeue)
	}
	return true
}

// forget drops a deleted schedule's compiled form.
func (c *Controller) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.compiled, uid)
}

// compile returns the compiled schedule, cached per generation.
func (c *Controller) compile(ds *v1alpha1.DeploySchedule) (*schedule.Schedule, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.compiled[ds.UID]; ok && cs.generation == ds.Generation && ds.Generation != 0 {
		return cs.schedule, nil
	}
	s, err := schedule.Compile(ds)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	c.compiled[ds.UID] = compiledSchedule{generation: ds.Generation, schedule: s}
	return s, nil
}
