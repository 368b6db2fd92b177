package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/forecast"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// Controller reconciles DeploySchedules.
type Controller struct {
	opts      Options
	schedules schedules
	workloads workloadAccess
	gate      gateReader
	previewer *preview.Previewer
	// forecasts is the capacity forecast behind the Forecast condition
	// (nil when Options.ForecastPeriod is negative).
	forecasts *forecaster
	metrics   *controllerMetrics
	// informer is the DeploySchedule informer of Options.DynFactory (nil
	// without one).
	informer cache.SharedIndexInformer
	// synced are the informers Run waits for besides informer: the
	// workload caches of Options.Factory and the gate informer of
	// Options.GateFactory (none without them).
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	// specs is each schedule's validated and compiled spec, per
	// generation, shared by the passes and the forecast.
	specs *specCache
}

// New returns a controller; Run starts it, Reconcile runs one pass. It
// returns an error when a required option is missing.
func New(opts Options) (*Controller, error) {
	if err := opts.defaultAndValidate(); err != nil {
		return nil, err
	}
	api := clusterWorkloads{client: opts.Client, dynamic: opts.Dynamic}
	c := &Controller{
		opts:      opts,
		schedules: schedules{dyn: opts.Dynamic, versions: &knownVersions{}},
		workloads: api,
		previewer: preview.New(),
		metrics:   newMetrics(opts.Registry),
		specs:     newSpecCache(),
		gate:      gateReader{client: opts.Client, namespace: opts.GateNamespace, name: opts.GateName},
	}
	if opts.GateFactory != nil {
		if err := c.watchGate(opts.GateFactory); err != nil {
			return nil, err
		}
	}
	// Zero reads the forecast's schedules and workloads from the API.
	var sources forecast.Sources
	if opts.Factory != nil {
		// Target workloads come from informers; no handler on them: passes
		// are periodic (PassPeriod) and steps in flight are looked at every
		// ProgressPeriod, so a workload event has nothing to requeue, and
		// status churn of thousands of Deployments would queue their
		// schedules for nothing.
		cached := newCachedWorkloads(api, opts.Factory, opts.LeaderWorkerSets)
		c.workloads, c.synced = cached, append(c.synced, cached.synced...)
		sources.Workloads = forecast.CachedWorkloads{Deployments: cached.deployments, StatefulSets: cached.statefulSets}
	}
	if opts.ForecastPeriod > 0 {
		c.forecasts = &forecaster{client: opts.Client, dynamic: opts.Dynamic, sources: sources, clock: opts.Clock,
			period: opts.ForecastPeriod, span: opts.ForecastRange}
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployschedule", Clock: opts.Clock})
	if opts.DynFactory != nil {
		if err := c.watch(opts.DynFactory); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// watch takes the DeploySchedule informer from the caller's factory, indexes
// it by the workloads schedules name (for ownership) and enqueues every
// change. The informer's list-watch follows the client: a real apiserver
// streams the initial list (WatchList), a fake client lists then watches.
func (c *Controller) watch(factory dynamicinformer.DynamicSharedInformerFactory) error {
	informer := factory.ForResource(v1alpha1.DeploySchedulesResource).Informer()
	if err := informer.AddIndexers(cache.Indexers{workloadIndex: indexByWorkload}); err != nil {
		return fmt.Errorf("index DeploySchedules: %w", err)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			c.enqueue(obj)
			if !initialList { // the initial list queues every schedule anyway
				c.forecastChanged()
			}
		},
		UpdateFunc: func(old, obj any) {
			c.enqueue(obj)
			if o, err := meta.Accessor(old); err == nil {
				if n, err := meta.Accessor(obj); err == nil && o.GetGeneration() != n.GetGeneration() {
					c.forecastChanged()
				}
			}
		},
		DeleteFunc: func(obj any) {
			gone := obj
			if tombstone, ok := gone.(cache.DeletedFinalStateUnknown); ok {
				gone = tombstone.Obj
			}
			if m, err := meta.Accessor(gone); err == nil {
				c.specs.forget(m.GetUID())
				c.schedules.versions.forget(m.GetNamespace() + "/" + m.GetName())
			}
			c.enqueue(obj)
			c.forecastChanged()
		},
	}); err != nil {
		return fmt.Errorf("add DeploySchedule handler: %w", err)
	}
	c.informer = informer
	if c.forecasts != nil {
		c.forecasts.sources.Schedules = &informerSchedules{store: informer.GetStore(), specs: c.specs}
	}
	return nil
}

// watchGate reads the gate from the informer of the caller's gate factory
// (NewGateInformerFactory) and queues every schedule when the switch
// changes, so that "off" holds back the next step at once rather than at
// each schedule's next pass.
func (c *Controller) watchGate(factory informers.SharedInformerFactory) error {
	informer := factory.Core().V1().ConfigMaps()
	c.gate.lister, c.gate.synced = informer.Lister(), informer.Informer().HasSynced
	c.synced = append(c.synced, c.gate.synced)
	mode := func(obj any) string {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if cm, ok := obj.(*v1.ConfigMap); ok && cm.Name == c.opts.GateName && cm.Namespace == c.opts.GateNamespace {
			return "set:" + cm.Data[GateKey]
		}
		return ""
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			if !initialList { // the initial list of schedules queues every one anyway
				c.gateChanged()
			}
		},
		UpdateFunc: func(old, obj any) {
			if mode(old) != mode(obj) {
				c.gateChanged()
			}
		},
		DeleteFunc: func(any) { c.gateChanged() },
	}); err != nil {
		return fmt.Errorf("add gate handler: %w", err)
	}
	return nil
}

// gateChanged queues every schedule.
func (c *Controller) gateChanged() {
	if c.informer == nil {
		return
	}
	for _, obj := range c.informer.GetStore().List() {
		c.enqueue(obj)
	}
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// forecastChanged forgets the capacity forecast after a schedule was added,
// changed or deleted, and queues every schedule: one schedule's windows can
// over-commit the pool for another's targets.
func (c *Controller) forecastChanged() {
	if c.forecasts == nil {
		return
	}
	c.forecasts.forget()
	if c.informer == nil {
		return
	}
	for _, obj := range c.informer.GetStore().List() {
		c.enqueue(obj)
	}
}

// Run waits for the informer the caller started, runs workers until ctx
// ends, and returns once every worker has finished the schedule it was
// reconciling.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown() // on every return; ShutDown is idempotent
	logger := klog.FromContext(ctx)
	if c.informer == nil {
		logger.Error(nil, "DeploySchedule controller cannot run: Options.DynFactory was not set")
		return
	}
	logger.Info("Starting DeploySchedule controller", "workers", workers)
	defer logger.Info("Stopped DeploySchedule controller")
	if !cache.WaitForNamedCacheSync("deployschedule", ctx.Done(), append([]cache.InformerSynced{c.informer.HasSynced}, c.synced...)...) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
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
