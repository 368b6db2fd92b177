// Package reservation is the GPUReservation controller. For each reservation
// it chooses the GPUs of the named node, holds them with one DeviceTaintRule
// per GPU (taint rota.dev/reserved=<namespace>.<name>, effect NoSchedule) so
// that the DRA allocator keeps every claim that does not tolerate it off them
// — idle or not, while members run and while they are all stopped — and keeps
// the status true: GPUs held, VRAM budget per GPU, members running with their
// memoryMiB and where they were placed, phase and conditions.
//
// Membership and the VRAM budget are enforced by the Reservation scheduler
// plugin (pkg/plugins/reservation); this package also holds the helpers the
// plugin shares with the controller (taint, budget, membership).
package reservation

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Controller reconciles GPUReservations.
type Controller struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	clock   clock.PassiveClock

	reservations cache.GenericLister
	slices       resourcelisters.ResourceSliceLister
	claims       resourcelisters.ResourceClaimLister
	rules        resourcelisters.DeviceTaintRuleLister
	pods         corelisters.PodLister
	nodes        corelisters.NodeLister
	replicaSets  appslisters.ReplicaSetLister
	synced       []cache.InformerSynced

	queue       workqueue.TypedRateLimitingInterface[string]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// New builds the controller on the caller's informer factories; the caller
// starts them (before or after Run). dynFactory must serve GVR.
func New(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface,
	factory informers.SharedInformerFactory, dynFactory dynamicinformer.DynamicSharedInformerFactory, clk clock.PassiveClock) (*Controller, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	if err := rotav1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	c := &Controller{
		client:      client,
		dynamic:     dyn,
		clock:       clk,
		queue:       workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "gpureservation"}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme, v1.EventSource{Component: "rota-reservation-controller"}),
	}
	resInformer := dynFactory.ForResource(GVR)
	c.reservations = resInformer.Lister()
	sliceInf := factory.Resource().V1().ResourceSlices()
	claimInf := factory.Resource().V1().ResourceClaims()
	ruleInf := factory.Resource().V1().DeviceTaintRules()
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	rsInf := factory.Apps().V1().ReplicaSets()
	c.slices, c.claims, c.rules = sliceInf.Lister(), claimInf.Lister(), ruleInf.Lister()
	c.pods, c.nodes, c.replicaSets = podInf.Lister(), nodeInf.Lister(), rsInf.Lister()

	handlers := []struct {
		informer cache.SharedIndexInformer
		enqueue  func(obj any)
	}{
		{resInformer.Informer(), c.enqueueReservation},
		{sliceInf.Informer(), c.enqueueForSlice},
		{claimInf.Informer(), c.enqueueNamespaceOf},
		{podInf.Informer(), c.enqueueNamespaceOf},
		{ruleInf.Informer(), c.enqueueForRule},
		{nodeInf.Informer(), c.enqueueForNode},
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
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		c.synced = append(c.synced, h.informer.HasSynced)
	}
	c.synced = append(c.synced, rsInf.Informer().HasSynced)
	return c, nil
}

// Run processes reservations with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	logger.Info("Starting GPUReservation controller", "workers", workers)
	defer logger.Info("Stopped GPUReservation controller")
	if !cache.WaitForNamedCacheSync("gpureservation", ctx.Done(), c.synced...) {
		return
	}
	for range workers {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
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

// enqueueWhere enqueues every reservation for which match is true.
func (c *Controller) enqueueWhere(namespace string, match func(*rotav1.GPUReservation) bool) {
	var objs []runtime.Object
	var err error
	if namespace == "" {
		objs, err = c.reservations.List(labels.Everything())
	} else {
		objs, err = c.reservations.ByNamespace(namespace).List(labels.Everything())
	}
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, o := range objs {
		res, err := FromObject(o)
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		if match(res) {
			c.queue.Add(res.Namespace + "/" + res.Name)
		}
	}
}

func (c *Controller) enqueueNamespaceOf(obj any) {
	if m, ok := obj.(interface{ GetNamespace() string }); ok {
		c.enqueueWhere(m.GetNamespace(), func(*rotav1.GPUReservation) bool { return true })
	}
}

func (c *Controller) enqueueForSlice(obj any) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || s.Spec.NodeName == nil {
		return
	}
	node := *s.Spec.NodeName
	c.enqueueWhere("", func(r *rotav1.GPUReservation) bool { return r.Spec.NodeName == node })
}

func (c *Controller) enqueueForNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.enqueueWhere("", func(r *rotav1.GPUReservation) bool { return r.Spec.NodeName == n.Name })
}

// enqueueForRule wakes the reservation owning a rule and every reservation
// that may have waited for the rule's device.
func (c *Controller) enqueueForRule(obj any) {
	if _, ok := obj.(*resourceapi.DeviceTaintRule); !ok {
		return
	}
	c.enqueueWhere("", func(r *rotav1.GPUReservation) bool { return true })
}
