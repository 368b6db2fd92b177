// Package controller is the GPUReservation controller. For each reservation
// it chooses the GPUs of the named node, holds them with one DeviceTaintRule
// per GPU (taint rota.dev/reserved=<namespace>.<name>, effect NoSchedule) so
// that the DRA allocator keeps every claim that does not tolerate it off them
// — idle or not, while members run and while they are all stopped — and keeps
// the status true: GPUs held, VRAM budget per GPU, members running with their
// memoryMiB and where they were placed, phase and conditions.
//
// Membership and the VRAM budget are enforced by the Reservation scheduler
// plugin (pkg/plugins/reservation); the rules both apply (taint values,
// budget, membership) are in pkg/reservation, which imports no controller.
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/reservation"
)

// Controller reconciles GPUReservations.
type Controller struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	clock   clock.PassiveClock

	reservations cache.GenericLister
	claims       resourcelisters.ResourceClaimLister
	rules        resourcelisters.DeviceTaintRuleLister
	classes      resourcelisters.DeviceClassLister
	pods         corelisters.PodLister
	nodes        corelisters.NodeLister
	owners       *reservation.Owners
	synced       []cache.InformerSynced

	// The informers' indexers, for the controller's indexes (indexes.go).
	reservationIndex, sliceIndex, claimIndex, ruleIndex cache.Indexer

	queue      workqueue.TypedRateLimitingInterface[string]
	recorder   record.EventRecorder
	metrics    *controllerMetrics
	quotaClass string
}

// Options are what the controller needs from its binary.
type Options struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Clock is required: reservation windows and conditions are stamped
	// with it.
	Clock clock.PassiveClock
	// Recorder writes events and is required; its scheme must know
	// GPUReservation. The binary owns the one event broadcaster behind it.
	Recorder record.EventRecorder
	// Informers are required: the controller reads everything it syncs
	// from their listers. The caller owns their factories and starts them
	// once New has returned; Run waits for them to sync.
	Informers Informers
	// Registry receives the controller's metrics; nil: none are exported.
	Registry metrics.KubeRegistry
	// QuotaDeviceClass is the class a reservation's GPUs are charged to in
	// its namespace's ResourceQuota; "" means DefaultQuotaDeviceClass.
	QuotaDeviceClass string
}

// New builds the controller.
func New(opts Options) (*Controller, error) {
	if opts.Client == nil || opts.Dynamic == nil || opts.Clock == nil || opts.Recorder == nil {
		return nil, fmt.Errorf("reservation controller: Client, Dynamic, Clock and Recorder are required")
	}
	if err := opts.Informers.validate(); err != nil {
		return nil, fmt.Errorf("reservation controller: %w", err)
	}
	c := &Controller{
		client:     opts.Client,
		dynamic:    opts.Dynamic,
		clock:      opts.Clock,
		queue:      workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "gpureservation"}),
		metrics:    newMetrics(),
		recorder:   opts.Recorder,
		quotaClass: opts.QuotaDeviceClass,
	}
	if c.quotaClass == "" {
		c.quotaClass = DefaultQuotaDeviceClass
	}
	if opts.Registry != nil {
		if err := c.metrics.register(opts.Registry); err != nil {
			return nil, err
		}
	}
	if err := c.watch(opts.Informers); err != nil {
		return nil, err
	}
	return c, nil
}

// watch sets up the listers and the event handlers that enqueue the
// reservations an object change concerns.
func (c *Controller) watch(inf Informers) error {
	if err := addIndexes(inf); err != nil {
		return err
	}
	c.reservationIndex, c.sliceIndex = inf.Reservations.Informer().GetIndexer(), inf.Slices.Informer().GetIndexer()
	c.claimIndex, c.ruleIndex = inf.Claims.Informer().GetIndexer(), inf.Rules.Informer().GetIndexer()
	c.reservations = inf.Reservations.Lister()
	c.claims, c.rules = inf.Claims.Lister(), inf.Rules.Lister()
	c.pods, c.nodes = inf.Pods.Lister(), inf.Nodes.Lister()
	c.owners = &reservation.Owners{
		ReplicaSets: inf.ReplicaSets.Lister(), Deployments: inf.Deployments.Lister(),
		StatefulSets: inf.StatefulSets.Lister(), Jobs: inf.Jobs.Lister(), Pods: c.pods,
	}
	if inf.LeaderWorkerSets != nil {
		c.owners.LeaderWorkerSets, c.owners.LeaderWorkerSetsSynced = inf.LeaderWorkerSets.Lister(), inf.LeaderWorkerSets.Informer().HasSynced
	}
	c.classes = inf.Classes.Lister()

	handlers := []struct {
		informer cache.SharedIndexInformer
		enqueue  func(obj any)
	}{
		{inf.Reservations.Informer(), c.enqueueReservation},
		{inf.Slices.Informer(), c.enqueueForSlice},
		{inf.Claims.Informer(), c.enqueueNamespaceOf},
		{inf.Pods.Informer(), c.enqueueNamespaceOf},
		{inf.Rules.Informer(), c.enqueueForRule},
		{inf.Nodes.Informer(), c.enqueueForNode},
	}
	for _, h := range handlers {
		enqueue := h.enqueue
		_, err := h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				enqueue(obj)
			},
		})
		if err != nil {
			return fmt.Errorf("adding event handler: %w", err)
		}
		c.synced = append(c.synced, h.informer.HasSynced)
	}
	c.synced = append(c.synced, inf.ReplicaSets.Informer().HasSynced, inf.Classes.Informer().HasSynced,
		inf.Deployments.Informer().HasSynced, inf.StatefulSets.Informer().HasSynced, inf.Jobs.Informer().HasSynced)
	return nil
}

// Run processes reservations with workers goroutines until ctx ends, and
// returns once every worker has finished the reservation it was syncing.
// The caller starts the informers (Options.Informers) and shuts them down
// after Run has returned.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown() // on every return; ShutDown is idempotent
	logger := klog.FromContext(ctx)
	logger.Info("Starting GPUReservation controller", "workers", workers)
	defer logger.Info("Stopped GPUReservation controller")
	if !cache.WaitForNamedCacheSync("gpureservation", ctx.Done(), c.synced...) {
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
	if err := c.sync(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Syncing GPUReservation failed, will retry", "key", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) enqueueReservation(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// enqueueNamespaceOf enqueues every reservation in the object's namespace:
// its pods and claims are the members the status counts.
func (c *Controller) enqueueNamespaceOf(obj any) {
	if m, ok := obj.(interface{ GetNamespace() string }); ok {
		c.enqueueByIndex(cache.NamespaceIndex, m.GetNamespace())
	}
}

func (c *Controller) enqueueForSlice(obj any) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || s.Spec.NodeName == nil {
		return
	}
	c.enqueueByIndex(indexReservationByNode, *s.Spec.NodeName)
}

func (c *Controller) enqueueForNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.enqueueByIndex(indexReservationByNode, n.Name)
}

// enqueueForRule wakes the reservation owning a rule and the reservations
// of the node whose pool the rule's device is in (they may have waited for
// that device, or hold it).
func (c *Controller) enqueueForRule(obj any) {
	r, ok := obj.(*resourceapi.DeviceTaintRule)
	if !ok {
		return
	}
	owners, _ := ruleReservation(r)
	for _, key := range owners {
		c.queue.Add(key)
	}
	sel := r.Spec.DeviceSelector
	if sel == nil || sel.Pool == nil {
		return
	}
	slices, err := byIndex[*resourceapi.ResourceSlice](c.sliceIndex, indexSliceByPool, *sel.Pool)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	nodes := map[string]bool{}
	for _, s := range slices {
		if s.Spec.NodeName != nil && !nodes[*s.Spec.NodeName] {
			nodes[*s.Spec.NodeName] = true
			c.enqueueByIndex(indexReservationByNode, *s.Spec.NodeName)
		}
	}
}
