package kubelet

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Kubelet runs the pods of one node. Create it with New, start it with Run.
type Kubelet struct {
	o     Options
	queue workqueue.TypedInterface[string]
	pods  corelisters.PodLister

	mu     sync.Mutex
	state  map[string]*podState
	timers map[string]timer
	// claims counts, per prepared claim, the pods on this node using it.
	claims map[types.UID]*preparedClaim
	// gen changes with every plugin call's start and end and every change
	// of claims; inFlight counts the calls under way (Claims).
	gen      uint64
	inFlight int
}

// podState is what the kubelet remembers about one pod, in clock time.
type podState struct {
	uid            types.UID
	boundAt        time.Time
	startedAt      time.Time
	deletionSeenAt time.Time
	// prepared are the claims this pod holds, from the moment their
	// prepare was asked for; prepareDone once every one was answered.
	prepared    []types.UID
	prepareDone bool
	// retry is the current back-off after a failure, zero when none.
	retry time.Duration
	// prepareErr is the last prepare failure reported in an Event.
	prepareErr string
}

type preparedClaim struct {
	namespace, name string
	pods            map[types.UID]bool
	// done: the plugin answered its prepare with success.
	done bool
}

type timer struct {
	t  clock.Timer
	at time.Time
}

// New returns a kubelet for o.NodeName.
func New(o Options) (*Kubelet, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Kubelet{
		o:      o,
		queue:  workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "sim-kubelet-" + o.NodeName}),
		state:  map[string]*podState{},
		timers: map[string]timer{},
		claims: map[types.UID]*preparedClaim{},
	}, nil
}

// Run watches the node's pods until ctx ends.
func (k *Kubelet) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("node", k.o.NodeName)
	ctx = klog.NewContext(ctx, logger)
	factory := informers.NewSharedInformerFactoryWithOptions(k.o.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.o.NodeName).String()
		}))
	podInformer := factory.Core().V1().Pods()
	k.pods = podInformer.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("kubelet %s: watching pods: %w", k.o.NodeName, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return ctx.Err()
	}
	logger.V(2).Info("Simulated kubelet running")

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k.processNext(ctx) {
		}
	}()
	<-ctx.Done()
	k.queue.ShutDown()
	k.mu.Lock()
	for key, t := range k.timers {
		t.t.Stop()
		delete(k.timers, key)
	}
	k.mu.Unlock()
	wg.Wait()
	return nil
}

func (k *Kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	k.sync(ctx, key)
	return true
}

// after queues key again at clock time at, replacing a later wake-up.
//
// Two rules keep a wake-up from being lost, whoever moves the clock and
// when. The timer's callback only queues the key and takes no lock: a fake
// clock runs callbacks while it holds its own lock, so a callback waiting
// for k.mu while after held k.mu and asked the clock for the time was a
// deadlock. And a timer counts only when the clock stood still while it was
// set: a timer takes a duration, not an instant, so one set just after the
// clock moved (another goroutine's Step between the reading and the
// AfterFunc) would fire that much late or, on a clock nobody steps again,
// never. Such a timer is set again from the new reading, and a key whose
// time has come is queued at once. A superfluous wake-up costs one
// idempotent sync.
func (k *Kubelet) after(key string, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.o.Clock.Now()
	if t, ok := k.timers[key]; ok && now.Before(at) {
		if t.at.After(now) && !t.at.After(at) {
			return // an earlier wake-up is still to come
		}
		t.t.Stop()
		delete(k.timers, key)
	}
	for now.Before(at) {
		t := k.o.Clock.AfterFunc(at.Sub(now), func() { k.queue.Add(key) })
		read := k.o.Clock.Now()
		if read.Equal(now) {
			k.timers[key] = timer{t: t, at: at}
			return
		}
		t.Stop() // the clock moved while it was set: it may fire late
		now = read
	}
	k.queue.Add(key)
}

// retryLater queues key after the pod's back-off, which then doubles.
func (k *Kubelet) retryLater(key string, st *podState) {
	if st.retry == 0 {
		st.retry = k.o.RetryDelay
	} else {
		st.retry = min(2*st.retry, k.o.MaxRetryDelay)
	}
	k.after(key, k.o.Clock.Now().Add(st.retry))
}

func (k *Kubelet) sync(ctx context.Context, key string) {
	logger := klog.FromContext(ctx)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	pod, err := k.pods.Pods(namespace).Get(name)
	k.mu.Lock()
	st := k.state[key]
	k.mu.Unlock()
	if apierrors.IsNotFound(err) || (err == nil && pod.Spec.NodeName != k.o.NodeName) {
		// Gone (or deleted by someone else without waiting): release
		// whatever it held.
		if st != nil {
			if err := k.unprepare(ctx, st); err != nil {
				logger.Error(err, "Unpreparing claims of a removed pod", "pod", key)
				k.retryLater(key, st)
				return
			}
			k.forget(key)
		}
		return
	}
	if err != nil {
		return
	}
	if st == nil || st.uid != pod.UID {
		if st != nil {
			// Same name, new pod: the old one is gone.
			if err := k.unprepare(ctx, st); err != nil {
				logger.Error(err, "Unpreparing claims of a replaced pod", "pod", key)
			}
		}
		st = &podState{uid: pod.UID}
		k.mu.Lock()
		k.state[key] = st
		k.mu.Unlock()
	}
	now := k.o.Clock.Now()

	switch {
	case pod.DeletionTimestamp != nil:
		k.syncDeleting(ctx, key, pod, st, now)
	case pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed:
		if err := k.unprepare(ctx, st); err != nil {
			logger.Error(err, "Unpreparing claims of a finished pod", "pod", klog.KObj(pod))
			k.retryLater(key, st)
		}
	default:
		k.syncRunning(ctx, key, pod, st, now)
	}
}

// syncDeleting waits out the grace period, then unprepares the pod's claims
// and removes the pod, as the kubelet does once its containers stopped.
func (k *Kubelet) syncDeleting(ctx context.Context, key string, pod *v1.Pod, st *podState, now time.Time) {
	logger := klog.FromContext(ctx)
	if st.deletionSeenAt.IsZero() {
		st.deletionSeenAt = now
	}
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if k.o.MaxGracePeriod >= 0 && grace > k.o.MaxGracePeriod {
		grace = k.o.MaxGracePeriod
	}
	if st.startedAt.IsZero() && pod.Status.Phase != v1.PodRunning {
		grace = 0 // nothing runs yet that would need time to stop
	}
	if at := st.deletionSeenAt.Add(grace); now.Before(at) {
		k.after(key, at)
		return
	}
	if err := k.unprepare(ctx, st); err != nil {
		logger.Error(err, "Unpreparing claims of a terminated pod", "pod", klog.KObj(pod))
		k.retryLater(key, st)
		return
	}
	err := k.o.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		logger.Error(err, "Removing a terminated pod", "pod", klog.KObj(pod))
		k.retryLater(key, st)
		return
	}
	logger.V(2).Info("Pod terminated and removed", "pod", klog.KObj(pod))
	k.forget(key)
}

// syncRunning starts a bound pod after StartDelay and makes it Ready after
// ReadyDelay more.
//
// What the kubelet did is kept in st, not read back from the pod: the pod
// comes from the informer, which may not yet show the status this kubelet
// wrote. A wake-up that found such a stale Pending copy used to start the pod
// a second time and push its ready time out by the whole ReadyDelay, so the
// pod never became Ready on a clock that was not stepped again.
func (k *Kubelet) syncRunning(ctx context.Context, key string, pod *v1.Pod, st *podState, now time.Time) {
	logger := klog.FromContext(ctx)
	if st.boundAt.IsZero() {
		st.boundAt = now
	}
	if pod.Status.Phase == v1.PodRunning && st.startedAt.IsZero() {
		// Started before this kubelet came up.
		st.startedAt = now
	}
	if st.startedAt.IsZero() {
		if at := st.boundAt.Add(k.o.StartDelay); now.Before(at) {
			k.after(key, at)
			return
		}
		if err := k.prepare(ctx, pod, st); err != nil {
			logger.Error(err, "Preparing claims failed; retrying", "pod", klog.KObj(pod))
			k.prepareFailed(ctx, pod, st, err)
			k.retryLater(key, st)
			return
		}
		st.startedAt = now
	}
	ready := !now.Before(st.startedAt.Add(k.o.ReadyDelay))
	if pod.Status.Phase != v1.PodRunning || (ready && !isReady(pod)) {
		if err := k.updateStatus(ctx, pod, st, ready); err != nil {
			if apierrors.IsConflict(err) {
				k.queue.Add(key) // the informer brings the newer pod
				return
			}
			if !apierrors.IsNotFound(err) {
				logger.Error(err, "Updating pod status", "pod", klog.KObj(pod))
				k.retryLater(key, st)
			}
			return
		}
		st.retry = 0
		logger.V(2).Info("Pod status updated", "pod", klog.KObj(pod), "phase", v1.PodRunning, "ready", ready)
	}
	if !ready {
		k.after(key, st.startedAt.Add(k.o.ReadyDelay))
	}
}

func (k *Kubelet) forget(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.state, key)
	if t, ok := k.timers[key]; ok {
		t.t.Stop()
		delete(k.timers, key)
	}
}
