package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/rota-dev/rota/pkg/reservation"
	schedulecontroller "github.com/rota-dev/rota/pkg/schedule/controller"
)

// Watch caches what a report needs and tells when the cluster is quiet.
type Watch struct {
	Pods         corelisters.PodLister
	Claims       resourcelisters.ResourceClaimLister
	Slices       resourcelisters.ResourceSliceLister
	ReplicaSets  appslisters.ReplicaSetLister
	Schedules    cache.GenericLister
	Reservations cache.GenericLister

	mu         sync.Mutex
	lastChange time.Time
	onChange   []func(obj any)
	stop       func()
}

func startWatch(ctx context.Context, c *Cluster) (*Watch, error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, 0)
	w := &Watch{lastChange: time.Now()}
	pods := factory.Core().V1().Pods()
	claims := factory.Resource().V1().ResourceClaims()
	slices := factory.Resource().V1().ResourceSlices()
	rs := factory.Apps().V1().ReplicaSets()
	deploys := factory.Apps().V1().Deployments()
	schedules := dynFactory.ForResource(schedulecontroller.DeploySchedulesResource)
	reservations := dynFactory.ForResource(reservation.GVR)
	w.Pods, w.Claims, w.Slices, w.ReplicaSets = pods.Lister(), claims.Lister(), slices.Lister(), rs.Lister()
	w.Schedules, w.Reservations = schedules.Lister(), reservations.Lister()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    w.changed,
		UpdateFunc: func(_, obj any) { w.changed(obj) },
		DeleteFunc: w.changed,
	}
	var synced []cache.InformerSynced
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), claims.Informer(), slices.Informer(), rs.Informer(), deploys.Informer(), schedules.Informer(), reservations.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			cancel()
			return nil, fmt.Errorf("watching the cluster: %w", err)
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	w.stop = func() {
		cancel()
		factory.Shutdown()
		dynFactory.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		w.stop()
		return nil, fmt.Errorf("watching the cluster: caches did not sync")
	}
	return w, nil
}

// OnChange registers f for every object change seen (add, update, delete).
// Register before the run starts.
func (w *Watch) OnChange(f func(obj any)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onChange = append(w.onChange, f)
}

func (w *Watch) changed(obj any) {
	w.mu.Lock()
	w.lastChange = time.Now()
	fs := w.onChange
	w.mu.Unlock()
	for _, f := range fs {
		f(obj)
	}
}

// QuietFor is how long (real time) no watched object changed.
func (w *Watch) QuietFor() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.lastChange)
}

// schedulerBusy says whether the scheduler has pods in its active or
// back-off queue: it will act without any further cluster change.
func schedulerBusy() bool {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return false
	}
	for _, f := range families {
		if f.GetName() != "scheduler_pending_pods" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && (l.GetValue() == "active" || l.GetValue() == "backoff") && m.GetGauge().GetValue() > 0 {
					return true
				}
			}
		}
	}
	return false
}

// Settle waits (real time) until the cluster is quiet: no object changed
// for quiet, the scheduler has nothing queued, and no timer of the clock is
// due. It gives up after limit and says so.
func (c *Cluster) Settle(ctx context.Context, quiet, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		due := false
		if next, ok := c.opts.Clock.Next(); ok && !next.After(c.opts.Clock.Now()) {
			due = true
		}
		if !due && c.Watch.QuietFor() >= quiet && !schedulerBusy() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster still busy after %s (quiet for %s, scheduler busy %v)", limit, c.Watch.QuietFor(), schedulerBusy())
		}
	}
}
