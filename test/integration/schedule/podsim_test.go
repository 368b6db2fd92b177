package schedule

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// podSim is a minimal pod lifecycle for this package (pkg/sim/kubelet was not
// committed when these tests were written): a pod bound to a node becomes
// Running and Ready after startDelay on the fake clock (Running but never
// Ready when it carries neverReadyLabel), and a pod being
// deleted is removed once its grace period has passed on the fake clock.
type podSim struct {
	client     kubernetes.Interface
	clock      clock.Clock
	namespace  string
	startDelay time.Duration

	mu         sync.Mutex
	boundAt    map[types.UID]time.Time
	deletingAt map[types.UID]time.Time
}

func startPodSim(t *testing.T, client kubernetes.Interface, clk clock.Clock, namespace string) *podSim {
	s := &podSim{client: client, clock: clk, namespace: namespace, startDelay: 10 * time.Second,
		boundAt: map[types.UID]time.Time{}, deletingAt: map[types.UID]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				s.sync(ctx, t)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (s *podSim) sync(ctx context.Context, t *testing.T) {
	pods, err := s.client.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range pods.Items {
		pod := &pods.Items[i]
		switch {
		case pod.DeletionTimestamp != nil:
			first, ok := s.deletingAt[pod.UID]
			if !ok {
				s.deletingAt[pod.UID] = now
				continue
			}
			if now.Sub(first) < time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0))*time.Second {
				continue
			}
			err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
				t.Logf("pod sim: delete %s: %v", pod.Name, err)
			}
		case pod.Spec.NodeName != "" && !isReady(pod):
			if neverReady(pod) && pod.Status.Phase == v1.PodRunning {
				continue
			}
			first, ok := s.boundAt[pod.UID]
			if !ok {
				s.boundAt[pod.UID] = now
				continue
			}
			if now.Sub(first) < s.startDelay {
				continue
			}
			s.markStarted(ctx, t, pod, !neverReady(pod))
		}
	}
}

func isReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// neverReadyLabel on a pod makes the simulator start it (Running) but never
// report it Ready, as a container whose readiness probe keeps failing.
const neverReadyLabel = "podsim.rota.dev/never-ready"

func neverReady(pod *v1.Pod) bool { return pod.Labels[neverReadyLabel] == "true" }

// markStarted makes the pod Running, Ready or not.
func (s *podSim) markStarted(ctx context.Context, t *testing.T, pod *v1.Pod, ready bool) {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	real := metav1.Now()
	pod = pod.DeepCopy()
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &real
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: real},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: real},
		{Type: v1.ContainersReady, Status: status, LastTransitionTime: real},
		{Type: v1.PodReady, Status: status, LastTransitionTime: real},
	}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "main", Ready: ready, Image: pod.Spec.Containers[0].Image,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: real}}}}
	if _, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		t.Logf("pod sim: status of %s: %v", pod.Name, err)
	}
}
