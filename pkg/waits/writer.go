package waits

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// condition is the rota.dev/Waiting condition a pod should carry.
type condition struct {
	waiting bool
	reason  string
	message string
	since   time.Time // last transition
	// detail is the rota.dev/wait-detail annotation's value; "" removes it.
	detail string
	// advice is the rota.dev/advice annotation's value ("" removes it) and
	// adviceSummary its first option in one line, added to the message.
	advice, adviceSummary string
}

// AdviceSeparator joins the wait's headline and the first unblock option
// in the rota.dev/Waiting condition's message.
const AdviceSeparator = "; to admit: "

// fullMessage is the condition's message: the wait's headline, then the
// first unblock option when there is one.
func (c condition) fullMessage() string {
	if c.adviceSummary == "" || !c.waiting {
		return c.message
	}
	return c.message + AdviceSeparator + c.adviceSummary
}

// Writer keeps every waiting pod's rota.dev/Waiting condition current
// without slowing the scheduling cycle down: the cycle records the wanted
// condition in memory, and workers patch pod status later, coalescing
// repeated attempts of one pod into one write and skipping writes that
// would change nothing. An Event with the one-line headline is emitted
// only when the reason changes, not on every attempt.
type Writer struct {
	client   kubernetes.Interface
	recorder events.EventRecorder
	clock    clock.PassiveClock
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu      sync.Mutex
	want    map[types.NamespacedName]condition
	written map[types.NamespacedName]condition
}

// NewWriter returns a writer; Run starts its workers.
func NewWriter(client kubernetes.Interface, recorder events.EventRecorder, clk clock.PassiveClock) *Writer {
	return &Writer{
		client: client, recorder: recorder, clock: clk,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "rota_wait_conditions"}),
		want:    map[types.NamespacedName]condition{},
		written: map[types.NamespacedName]condition{},
	}
}

// Wait records that pod waits for verdict's reason. The Event is emitted
// now when the reason is new for the pod; the condition (its message the
// short form, ConditionMessage) and the wait-detail annotation are written
// later.
func (w *Writer) Wait(pod *v1.Pod, v Verdict) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	prev, known := w.want[key]
	if !known {
		if c := Current(pod); c != nil {
			prev = condition{waiting: c.Status == v1.ConditionTrue, reason: c.Reason, message: c.Message, since: c.LastTransitionTime.Time,
				detail: pod.Annotations[gpuv1.WaitDetailAnnotation], advice: pod.Annotations[gpuv1.AdviceAnnotation]}
			w.written[key] = prev
		}
	}
	// A verdict without detail (the Gang plugin's own) leaves the
	// annotation as it is; why shows it only while it matches the condition.
	detail := prev.detail
	if v.Detail.Headline != "" {
		if enc, err := EncodeDetail(v.Detail); err == nil {
			detail = enc
		}
	}
	next := condition{waiting: true, reason: string(v.Reason), message: ConditionMessage(v), since: prev.since, detail: detail,
		advice: prev.advice, adviceSummary: prev.adviceSummary}
	if !prev.waiting || prev.reason != next.reason {
		next.since = w.clock.Now()
	}
	w.want[key] = next
	w.mu.Unlock()
	if prev.reason != next.reason || !prev.waiting {
		w.recorder.Eventf(pod, nil, v1.EventTypeWarning, string(v.Reason), "Waiting", "%s", next.message)
	}
	if prev != next {
		w.queue.Add(key)
	}
}

// Advise records the unblock advice for a waiting pod: encoded is the
// rota.dev/advice annotation's value, summary its first option in one line
// (added to the condition's message). An Event is emitted only when the
// summary changes, not on every attempt. It does nothing for a pod the
// writer does not know as waiting.
func (w *Writer) Advise(pod *v1.Pod, summary, encoded string) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	prev, known := w.want[key]
	if !known || !prev.waiting || (prev.advice == encoded && prev.adviceSummary == summary) {
		w.mu.Unlock()
		return
	}
	next := prev
	next.advice, next.adviceSummary = encoded, summary
	w.want[key] = next
	w.mu.Unlock()
	if summary != "" && summary != prev.adviceSummary && pod.Annotations[gpuv1.AdviceAnnotation] != encoded {
		w.recorder.Eventf(pod, nil, v1.EventTypeNormal, gpuv1.AdviceEventReason, "Advise", "%s", summary)
	}
	w.queue.Add(key)
}

// Placed records that pod was bound to node: its condition turns False
// with reason Placed, if it ever carried one.
func (w *Writer) Placed(pod *v1.Pod, node string) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	prev, known := w.want[key]
	if !known && Current(pod) == nil {
		w.mu.Unlock()
		return
	}
	msg := fmt.Sprintf("placed on node %s", node)
	if known && prev.waiting {
		msg = fmt.Sprintf("placed on node %s after waiting %s (last reason %s)", node, w.clock.Since(prev.since).Round(time.Millisecond), prev.reason)
	}
	w.want[key] = condition{waiting: false, reason: Placed, message: msg, since: w.clock.Now()}
	w.mu.Unlock()
	w.queue.Add(key)
}

// Forget drops what the writer knows of a deleted pod.
func (w *Writer) Forget(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	w.mu.Lock()
	delete(w.want, key)
	delete(w.written, key)
	w.mu.Unlock()
}

// Run writes conditions with workers goroutines until ctx ends.
func (w *Writer) Run(ctx context.Context, workers int) {
	for range workers {
		go func() {
			for w.processNext(ctx) {
			}
		}()
	}
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
}

func (w *Writer) processNext(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	w.mu.Lock()
	want, ok := w.want[key]
	done := ok && w.written[key] == want
	w.mu.Unlock()
	if !ok || done {
		w.queue.Forget(key)
		return true
	}
	err := w.patch(ctx, key, want)
	switch {
	case apierrors.IsNotFound(err):
		w.Forget(key.Namespace, key.Name)
		w.queue.Forget(key)
	case err != nil:
		klog.FromContext(ctx).V(2).Info("Could not write waiting condition, will retry", "pod", key, "err", err)
		w.queue.AddRateLimited(key)
	default:
		w.queue.Forget(key)
		w.mu.Lock()
		if !want.waiting && w.want[key] == want {
			// Placed and written: nothing more to say about this pod.
			delete(w.want, key)
			delete(w.written, key)
		} else {
			w.written[key] = want
		}
		w.mu.Unlock()
	}
	return true
}

func (w *Writer) patch(ctx context.Context, key types.NamespacedName, c condition) error {
	if err := w.patchCondition(ctx, key, c); err != nil {
		return err
	}
	return w.patchDetail(ctx, key, c)
}

// patchDetail writes the rota.dev/wait-detail annotation, or removes it
// once the pod is placed. It is skipped when it would change nothing.
func (w *Writer) patchDetail(ctx context.Context, key types.NamespacedName, c condition) error {
	w.mu.Lock()
	old, known := w.written[key]
	w.mu.Unlock()
	if known && old.detail == c.detail && old.advice == c.advice {
		return nil
	}
	var value, advice any // nil removes the annotation
	if c.detail != "" {
		value = c.detail
	}
	if c.advice != "" && c.waiting {
		advice = c.advice
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{gpuv1.WaitDetailAnnotation: value, gpuv1.AdviceAnnotation: advice}}})
	if err != nil {
		return fmt.Errorf("encode wait detail patch: %w", err)
	}
	if _, err := w.client.CoreV1().Pods(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch wait detail of pod %s: %w", key, err)
	}
	return nil
}

func (w *Writer) patchCondition(ctx context.Context, key types.NamespacedName, c condition) error {
	status := v1.ConditionTrue
	if !c.waiting {
		status = v1.ConditionFalse
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.PodCondition{{
		Type: gpuv1.WaitingCondition, Status: status, Reason: c.reason, Message: c.fullMessage(),
		LastTransitionTime: metav1.NewTime(c.since),
	}}}})
	if err != nil {
		return fmt.Errorf("encode condition patch: %w", err)
	}
	_, err = w.client.CoreV1().Pods(key.Namespace).Patch(ctx, key.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch status of pod %s: %w", key, err)
	}
	return nil
}
