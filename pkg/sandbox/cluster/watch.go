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
	eventslisters "k8s.io/client-go/listers/events/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Watch caches what a report needs and tells when the cluster is quiet.
type Watch struct {
	Pods         corelisters.PodLister
	Claims       resourcelisters.ResourceClaimLister
	Slices       resourcelisters.ResourceSliceLister
	ReplicaSets  appslisters.ReplicaSetLister
	Schedules    cache.GenericLister
	Reservations cache.GenericLister
	Quotas       cache.GenericLister
	// Events are the events.k8s.io Events (those of deleted pods too);
	// they do not count as changes for Settle.
	Events eventslisters.EventLister

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
	schedules := dynFactory.ForResource(rotav1.DeploySchedulesResource)
	reservations := dynFactory.ForResource(rotav1.GPUReservationsResource)
	quotas := dynFactory.ForResource(rotav1.GPUQuotasResource)
	w.Pods, w.Claims, w.Slices, w.ReplicaSets = pods.Lister(), claims.Lister(), slices.Lister(), rs.Lister()
	w.Schedules, w.Reservations, w.Quotas = schedules.Lister(), reservations.Lister(), quotas.Lister()
	events := factory.Events().V1().Events()
	w.Events = events.Lister()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    w.changed,
		UpdateFunc: func(_, obj any) { w.changed(obj) },
		DeleteFunc: w.changed,
	}
	var synced []cache.InformerSynced
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), claims.Informer(), slices.Informer(), rs.Informer(), deploys.Informer(), schedules.Informer(), reservations.Informer(), quotas.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			cancel()
			return nil, fmt.Errorf("watching the cluster: %w", err)
		}
		synced = append(synced, inf.HasSynced)
	}
	synced = append(synced, events.Informer().HasSynced)
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
	if obj == nil {
		return
	}
	for _, f := range fs {
		f(obj)
	}
}

// Touch counts as a change: whatever the caller just did (moving the
// clock, applying objects) may make components act.
func (w *Watch) Touch() { w.changed(nil) }

// QuietFor is how long (real time) no watched object changed.
func (w *Watch) QuietFor() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.lastChange)
}

// busy says what would still act without any further cluster change: pods
// in the scheduler's active or back-off queue, or a controller work queue
// (the schedule and reservation controllers, kube-controller-manager's, the
// simulated kubelets') holding items or processing one. "" when nothing.
func busy() string {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return ""
	}
	gets, dones := map[string]uint64{}, map[string]uint64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			label := func(name string) string {
				for _, l := range m.GetLabel() {
					if l.GetName() == name {
						return l.GetValue()
					}
				}
				return ""
			}
			switch f.GetName() {
			case "scheduler_pending_pods":
				if q := label("queue"); (q == "active" || q == "backoff") && m.GetGauge().GetValue() > 0 {
					return "scheduler " + q + " queue"
				}
			case "workqueue_depth":
				if m.GetGauge().GetValue() > 0 {
					return "work queue " + label("name")
				}
			case "workqueue_queue_duration_seconds":
				gets[label("name")] = m.GetHistogram().GetSampleCount()
			case "workqueue_work_duration_seconds":
				dones[label("name")] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	for name, n := range gets {
		if n > dones[name] {
			return "work queue " + name + " (processing)"
		}
	}
	return ""
}

// Settle waits (real time) until the cluster is quiet: no object changed
// for quiet, nothing is queued in the scheduler or a controller, no pod is
// in a scheduling or binding cycle, and no timer of the clock is due. It
// gives up after limit and says so.
func (c *Cluster) Settle(ctx context.Context, quiet, limit time.Duration) error {
	begin := time.Now()
	deadline := begin.Add(limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	why, lastWhy := "", ""
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		// A timer that is due, or fired with its receiver not yet done
		// (a kubelet's wake-up, a work queue's delayed add), is work that
		// no object change shows yet.
		due := c.opts.Clock.Pending() > 0
		if next, ok := c.opts.Clock.Next(); ok && !next.After(c.opts.Clock.Now()) {
			due = true
		}
		if !due && c.Watch.QuietFor() >= quiet {
			if why = busy(); why == "" && c.schedulerInFlight != nil {
				if n := c.schedulerInFlight(); n > 0 {
					why = fmt.Sprintf("scheduler: %d pod(s) in flight", n)
				}
			}
			if why == "" {
				if took := time.Since(begin); took > time.Second {
					klog.FromContext(ctx).V(3).Info("Settled slowly", "took", took, "lastBusy", lastWhy)
				}
				return nil
			}
			lastWhy = why
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster still busy after %s (quiet for %s; %s)", limit, c.Watch.QuietFor(), why)
		}
	}
}
