package waits

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What a node says when a placed pod's GPUs cannot be handed to it. The
// strings are the kubelet's and the container runtimes' (Kubernetes 1.37,
// pkg/kubelet/events and kuberuntime), not Rota's.
const (
	// KubeletPrepareFailed is the reason of the Warning Event the kubelet
	// records on a pod when NodePrepareResources fails for its claims.
	KubeletPrepareFailed = "FailedPrepareDynamicResources"
	// cdiMarker is how containerd's and CRI-O's errors name a CDI device
	// injection failure ("CDI device injection failed: unresolvable CDI
	// devices ..."); the kubelet copies it into the container's waiting
	// message.
	cdiMarker = "cdi"
)

// containerCreateErrors are the waiting reasons the kubelet gives a
// container the runtime failed to create or start.
var containerCreateErrors = map[string]bool{"CreateContainerError": true, "RunContainerError": true, "StartError": true}

// StartFailureFromEvent reports whether ev is the kubelet saying it could
// not prepare a pod's claims, and the condition message for it.
func StartFailureFromEvent(ev *v1.Event, node string) (string, bool) {
	if ev.Reason != KubeletPrepareFailed || ev.InvolvedObject.Kind != "Pod" {
		return "", false
	}
	msg := strings.TrimPrefix(ev.Message, "Failed to prepare dynamic resources: ")
	return fmt.Sprintf("placed on node %s, but the kubelet could not prepare its GPUs: %s", node, truncateMessage(msg)), true
}

// StartFailureFromStatus reports whether a placed pod's container waits
// because the runtime could not inject its CDI devices, and the condition
// message for it.
func StartFailureFromStatus(pod *v1.Pod) (string, bool) {
	if pod.Spec.NodeName == "" || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return "", false
	}
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			w := cs.State.Waiting
			if w == nil || !containerCreateErrors[w.Reason] || !strings.Contains(strings.ToLower(w.Message), cdiMarker) {
				continue
			}
			return fmt.Sprintf("placed on node %s, but container %s cannot start: its GPUs' CDI devices were not injected (%s): %s",
				pod.Spec.NodeName, cs.Name, w.Reason, truncateMessage(w.Message)), true
		}
	}
	return "", false
}

// Started reports whether every container of a placed pod has started:
// whatever kept it from starting is over.
func Started(pod *v1.Pod) bool {
	if pod.Spec.NodeName == "" || len(pod.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil && cs.State.Terminated == nil {
			return false
		}
	}
	return true
}

func truncateMessage(s string) string {
	const max = 512
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// StartFailed records that pod, placed on its node, cannot start there
// (message from StartFailureFromEvent or StartFailureFromStatus): its
// condition turns True with reason StartFailed, and an Event says so when
// the reason is new for the pod. It reports whether it was new.
func (w *Writer) StartFailed(pod *v1.Pod, message string) bool {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	prev, known := w.want[key]
	if !known {
		if c := Current(pod); c != nil {
			prev = condition{waiting: c.Status == v1.ConditionTrue, reason: c.Reason, message: c.Message, since: c.LastTransitionTime.Time}
			w.written[key] = prev
		}
	}
	next := condition{waiting: true, reason: string(StartFailed), message: message, since: prev.since}
	if !prev.waiting || prev.reason != next.reason {
		next.since = w.clock.Now()
	}
	w.want[key] = next
	w.mu.Unlock()
	fresh := !prev.waiting || prev.reason != next.reason
	if fresh {
		w.recorder.Eventf(pod, nil, v1.EventTypeWarning, string(StartFailed), "Starting", "%s", message)
	}
	if prev != next {
		w.queue.Add(key)
	}
	return fresh
}

// StartRecovered records that a pod that could not start has started: its
// condition turns False with reason Placed again.
func (w *Writer) StartRecovered(pod *v1.Pod) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	prev, known := w.want[key]
	if !known {
		c := Current(pod)
		if c == nil || c.Status != v1.ConditionTrue || c.Reason != string(StartFailed) {
			w.mu.Unlock()
			return
		}
		prev = condition{waiting: true, reason: c.Reason, message: c.Message, since: c.LastTransitionTime.Time}
		w.written[key] = prev
	}
	if !prev.waiting || prev.reason != string(StartFailed) {
		w.mu.Unlock()
		return
	}
	msg := fmt.Sprintf("placed on node %s; started after %s with %s", pod.Spec.NodeName, w.clock.Since(prev.since).Round(time.Millisecond), StartFailed)
	w.want[key] = condition{waiting: false, reason: Placed, message: msg, since: w.clock.Now()}
	w.mu.Unlock()
	w.queue.Add(key)
}
