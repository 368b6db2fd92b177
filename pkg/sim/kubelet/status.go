package kubelet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// prepareFailedReason is the kubelet's Event reason for a failed
// NodePrepareResources (k8s.io/kubernetes/pkg/kubelet/events).
const prepareFailedReason = "FailedPrepareDynamicResources"

// updateStatus writes the status of a pod whose containers run since
// st.startedAt, ready or not yet.
func (k *Kubelet) updateStatus(ctx context.Context, pod *v1.Pod, st *podState, ready bool) error {
	pod = pod.DeepCopy()
	started := metav1.NewTime(st.startedAt)
	bound := metav1.NewTime(st.boundAt)
	pod.Status.Phase = v1.PodRunning
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &bound
	}
	readyStatus := v1.ConditionFalse
	readyTime := started
	if ready {
		readyStatus = v1.ConditionTrue
		readyTime = metav1.NewTime(st.startedAt.Add(k.o.ReadyDelay))
	}
	setCondition(pod, v1.PodReadyToStartContainers, v1.ConditionTrue, started)
	setCondition(pod, v1.PodInitialized, v1.ConditionTrue, started)
	setCondition(pod, v1.ContainersReady, readyStatus, readyTime)
	setCondition(pod, v1.PodReady, readyStatus, readyTime)
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     c.Image,
			ContainerID: fmt.Sprintf("sim://%s/%s", pod.UID, c.Name),
			Ready:       ready,
			Started:     new(bool(true)),
			State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
		})
	}
	_, err := k.o.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

func setCondition(pod *v1.Pod, t v1.PodConditionType, status v1.ConditionStatus, at metav1.Time) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == t {
			if c.Status != status {
				c.Status, c.LastTransitionTime = status, at
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: t, Status: status, LastTransitionTime: at})
}

func isReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// prepareFailed records the Warning Event the kubelet records when
// NodePrepareResources fails for a pod (reason
// FailedPrepareDynamicResources, Kubernetes 1.37 kuberuntime), once per
// distinct error: the pod stays Pending and the kubelet retries.
func (k *Kubelet) prepareFailed(ctx context.Context, pod *v1.Pod, st *podState, err error) {
	msg := "Failed to prepare dynamic resources: " + err.Error()
	if st.prepareErr == msg {
		return
	}
	now := metav1.NewTime(k.o.Clock.Now())
	ev := &v1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: pod.Name + "."},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Reason: prepareFailedReason, Message: msg, Type: v1.EventTypeWarning,
		Source:         v1.EventSource{Component: "kubelet", Host: k.o.NodeName},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "kubelet", ReportingInstance: k.o.NodeName,
	}
	if _, err := k.o.Client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not record prepare failure", "pod", klog.KObj(pod), "err", err)
		return
	}
	st.prepareErr = msg
}
