package waits

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// containerWaiting is a placed pod whose one container waits with reason
// and message.
func containerWaiting(reason, message string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "serve-1"},
		Spec:       v1.PodSpec{NodeName: "n1"},
		Status: v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{Name: "server",
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: message}}}}},
	}
}

func TestStartFailureFromStatus(t *testing.T) {
	cdi := `failed to create containerd container: CDI device injection failed: unresolvable CDI devices gpu.rota.dev/gpu=GPU-1`
	cases := []struct {
		name string
		pod  *v1.Pod
		want string // "" = not a start failure
	}{
		{"CDI injection failed", containerWaiting("CreateContainerError", cdi), "container server cannot start: its GPUs' CDI devices were not injected (CreateContainerError)"},
		{"runtime start error naming CDI", containerWaiting("RunContainerError", "cdi: spec not found"), "(RunContainerError): cdi: spec not found"},
		{"image pull is not Rota's", containerWaiting("ErrImagePull", "pull access denied"), ""},
		{"create error without CDI", containerWaiting("CreateContainerError", "no such file: /bin/server"), ""},
		{"still creating", containerWaiting("ContainerCreating", ""), ""},
		{"not placed", func() *v1.Pod { p := containerWaiting("CreateContainerError", cdi); p.Spec.NodeName = ""; return p }(), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, ok := StartFailureFromStatus(tc.pod)
			if ok != (tc.want != "") || !strings.Contains(msg, tc.want) {
				t.Errorf("StartFailureFromStatus = %q, %v; want containing %q", msg, ok, tc.want)
			}
			if ok && !strings.HasPrefix(msg, "placed on node n1, but ") {
				t.Errorf("message %q does not say where the pod is", msg)
			}
		})
	}
}

func TestStartFailureFromEvent(t *testing.T) {
	ev := &v1.Event{Reason: KubeletPrepareFailed, InvolvedObject: v1.ObjectReference{Kind: "Pod"},
		Message: "Failed to prepare dynamic resources: NodePrepareResources for pod ml/serve-1: claim ml/c: GPU gone"}
	msg, ok := StartFailureFromEvent(ev, "n1")
	if want := "placed on node n1, but the kubelet could not prepare its GPUs: NodePrepareResources for pod ml/serve-1: claim ml/c: GPU gone"; !ok || msg != want {
		t.Errorf("StartFailureFromEvent = %q, %v; want %q", msg, ok, want)
	}
	for _, other := range []*v1.Event{
		{Reason: "FailedScheduling", InvolvedObject: v1.ObjectReference{Kind: "Pod"}},
		{Reason: KubeletPrepareFailed, InvolvedObject: v1.ObjectReference{Kind: "Node"}},
	} {
		if msg, ok := StartFailureFromEvent(other, "n1"); ok {
			t.Errorf("event %s on %s classified as a start failure: %q", other.Reason, other.InvolvedObject.Kind, msg)
		}
	}
}

// TestWriterStartFailedAndRecovered: a placed pod that cannot start turns
// StartFailed once (one Event however often the kubelet retries), and back
// to Placed once its containers run.
func TestWriterStartFailedAndRecovered(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pod := containerWaiting("ContainerCreating", "")
	pod.Status.Conditions = []v1.PodCondition{{Type: gpuv1.WaitingCondition, Status: v1.ConditionFalse, Reason: Placed, Message: "placed on node n1"}}
	client := fake.NewClientset(pod)
	rec := events.NewFakeRecorder(10)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 10, 19, 8, 0, 0, 0, time.UTC))
	w := NewWriter(client, rec, clk)
	w.Run(ctx, 1)
	current := func() *v1.Pod {
		p, err := client.CoreV1().Pods("ml").Get(ctx, "serve-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	poll := func(what string, ok func(*v1.PodCondition) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			c := Current(current())
			return c != nil && ok(c), nil
		}); err != nil {
			t.Fatalf("%s: %v; condition %+v", what, err, Current(current()))
		}
	}
	if !w.StartFailed(pod, "placed on node n1, but the kubelet could not prepare its GPUs: boom") {
		t.Error("first StartFailed not reported new")
	}
	if w.StartFailed(pod, "placed on node n1, but the kubelet could not prepare its GPUs: boom") {
		t.Error("repeated StartFailed reported new")
	}
	poll("StartFailed written", func(c *v1.PodCondition) bool {
		return c.Status == v1.ConditionTrue && c.Reason == string(StartFailed) && strings.HasSuffix(c.Message, ": boom")
	})
	if got := len(rec.Events); got != 1 {
		t.Errorf("%d events, want 1", got)
	}
	clk.SetTime(clk.Now().Add(90 * time.Second))
	running := current()
	running.Status.Phase = v1.PodRunning
	running.Status.ContainerStatuses[0].State = v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	if !Started(running) {
		t.Fatal("Started = false for a pod whose container runs")
	}
	w.StartRecovered(running)
	poll("back to Placed", func(c *v1.PodCondition) bool {
		return c.Status == v1.ConditionFalse && c.Reason == Placed && c.Message == "placed on node n1; started after 1m30s with StartFailed"
	})
}
