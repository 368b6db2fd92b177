package quotastatus

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/pkg/reservation"
)

// poolKey is the one key of the queue. Every GPUQuota's status depends on
// every other's guarantee and use (whether the guarantees fit, who lends
// to whom), so a change of any input recomputes the accounting once and
// writes every status that differs, instead of once per GPUQuota.
const poolKey = "pool"

// Controller writes the status of every GPUQuota.
type Controller struct {
	dynamic dynamic.Interface
	clock   clock.PassiveClock

	quotas, reservations cache.GenericLister
	slices               resourcelisters.ResourceSliceLister
	claims               resourcelisters.ResourceClaimLister
	synced               []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

// Options are what the controller needs from its binary.
type Options struct {
	Dynamic dynamic.Interface
	// Clock is required: the condition's transitions are stamped with it.
	Clock clock.PassiveClock
	// Informers are required: the controller reads everything from their
	// listers. The caller owns their factories and starts them once New has
	// returned; Run waits for them to sync.
	Informers Informers
}

// New builds the controller.
func New(opts Options) (*Controller, error) {
	if opts.Dynamic == nil || opts.Clock == nil {
		return nil, errors.New("GPUQuota status controller: Dynamic and Clock are required")
	}
	if err := opts.Informers.validate(); err != nil {
		return nil, fmt.Errorf("GPUQuota status controller: %w", err)
	}
	inf := opts.Informers
	c := &Controller{
		dynamic:      opts.Dynamic,
		clock:        opts.Clock,
		quotas:       inf.Quotas.Lister(),
		reservations: inf.Reservations.Lister(),
		slices:       inf.Slices.Lister(),
		claims:       inf.Claims.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "gpuquota"}),
	}
	enqueue := func(any) { c.queue.Add(poolKey) }
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		update   func(old, obj any)
	}{
		{inf.Quotas.Informer(), func(_, obj any) { enqueue(obj) }},
		{inf.Reservations.Informer(), func(_, obj any) { enqueue(obj) }},
		{inf.Slices.Informer(), func(_, obj any) { enqueue(obj) }},
		{inf.Claims.Informer(), c.claimUpdated},
	} {
		_, err := h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: h.update, DeleteFunc: enqueue,
		})
		if err != nil {
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		c.synced = append(c.synced, h.informer.HasSynced)
	}
	return c, nil
}

// claimUpdated enqueues only when the claim's allocation changed: the
// rest of a claim (its consumers, conditions) counts for nothing here.
func (c *Controller) claimUpdated(old, obj any) {
	o, ok1 := old.(*resourceapi.ResourceClaim)
	n, ok2 := obj.(*resourceapi.ResourceClaim)
	if ok1 && ok2 && apiequality.Semantic.DeepEqual(o.Status.Allocation, n.Status.Allocation) {
		return
	}
	c.queue.Add(poolKey)
}

// Run writes statuses until ctx ends, and returns once the sync in
// progress has finished. There is one key, so one worker; workers is
// ignored. The caller starts the informers and shuts them down after Run
// has returned.
func (c *Controller) Run(ctx context.Context, _ int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Starting GPUQuota status controller")
	defer logger.Info("Stopped GPUQuota status controller")
	if !cache.WaitForNamedCacheSync("gpuquota", ctx.Done(), c.synced...) {
		return
	}
	c.queue.Add(poolKey)
	var wg sync.WaitGroup
	wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
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
	if err := c.sync(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Writing GPUQuota status failed, will retry")
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync computes the accounting of every GPUQuota once and writes each
// status that differs from the one computed.
func (c *Controller) sync(ctx context.Context) error {
	quotas, err := c.listQuotas()
	if err != nil {
		return err
	}
	pool, err := c.pool()
	if err != nil {
		return err
	}
	table, _ := gpuquota.NewTable(quotas, nil)
	reports := Reports(gpuquota.Account(table, pool))
	now := metav1.NewTime(c.clock.Now())
	var errs []error
	for _, q := range quotas {
		st := ComputeStatus(q, reports, gpuquota.Validate(q), now)
		if apiequality.Semantic.DeepEqual(q.Status, st) {
			continue
		}
		upd := q.DeepCopy()
		upd.Status = st
		if err := c.updateStatus(ctx, upd); err != nil {
			errs = append(errs, err)
			continue
		}
		klog.FromContext(ctx).V(2).Info("Wrote GPUQuota status", "gpuquota", klog.KObj(q), "models", len(st.Models))
	}
	return errors.Join(errs...)
}

// listQuotas decodes every GPUQuota of the informer's cache, by name. One
// that does not decode is left out (its status cannot be written either).
func (c *Controller) listQuotas() ([]*rotav1.GPUQuota, error) {
	objs, err := c.quotas.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing GPUQuotas: %w", err)
	}
	out := make([]*rotav1.GPUQuota, 0, len(objs))
	for _, o := range objs {
		q, err := gpuquota.FromObject(o)
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// pool reads the accounting's inputs from the informers (PoolOf).
func (c *Controller) pool() (gpuquota.Pool, error) {
	slices, err := c.slices.List(labels.Everything())
	if err != nil {
		return gpuquota.Pool{}, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return gpuquota.Pool{}, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	objs, err := c.reservations.List(labels.Everything())
	if err != nil {
		return gpuquota.Pool{}, fmt.Errorf("listing GPUReservations: %w", err)
	}
	reservations := make([]*rotav1.GPUReservation, 0, len(objs))
	for _, o := range objs {
		r, err := reservation.FromObject(o)
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		reservations = append(reservations, r)
	}
	return PoolOf(slices, claims, reservations), nil
}

func (c *Controller) updateStatus(ctx context.Context, q *rotav1.GPUQuota) error {
	u, err := gpuquota.ToUnstructured(q)
	if err != nil {
		return err
	}
	_, err = c.dynamic.Resource(rotav1.GPUQuotasResource).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted since it was listed
	}
	if err != nil {
		return fmt.Errorf("updating status of GPUQuota %s: %w", q.Name, err)
	}
	return nil
}
