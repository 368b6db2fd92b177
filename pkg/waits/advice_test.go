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

// TestWriterAdvice: the advice's first option joins the condition's
// message and its JSON the rota.dev/advice annotation; an Event is emitted
// when the advice changes, not when the same advice comes again; placing
// the pod removes the annotation.
func TestWriterAdvice(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "b-rank-0"}}
	client := fake.NewClientset(pod)
	rec := events.NewFakeRecorder(10)
	w := NewWriter(client, rec, clocktesting.NewFakePassiveClock(time.Date(2026, 10, 19, 8, 0, 0, 0, time.UTC)))
	w.Run(ctx, 1)
	v := Classify(Attempt{Requests: [][]TierCounts{{{Label: "request gpu", Name: "H100", Need: 2,
		Matching: map[string]int{"n1": 2, "n2": 2}, Free: map[string]int{"n1": 1, "n2": 1}}}}})
	w.Advise(pod, "ignored", `{"ignored":true}`) // not known as waiting yet
	w.Wait(pod, v)
	w.Advise(pod, "evict team-a/a-2 on n1", `{"options":[1]}`)
	w.Wait(pod, v)
	w.Advise(pod, "evict team-a/a-2 on n1", `{"options":[1]}`)
	w.Advise(pod, "wait until 18:00", `{"options":[2]}`)
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	want := "Warning TopologyFragmentation needs 2 GPUs on one node — H100 2/4 free (at most 1 per node)|" +
		"Normal UnblockAdvice evict team-a/a-2 on n1|Normal UnblockAdvice wait until 18:00"
	if strings.Join(got, "|") != want {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.ReplaceAll(want, "|", "\n"))
	}
	current := func() *v1.Pod {
		p, err := client.CoreV1().Pods("team-b").Get(ctx, "b-rank-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	poll := func(what string, ok func(*v1.Pod) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return ok(current()), nil
		}); err != nil {
			t.Fatalf("%s: %v; pod %+v %+v", what, err, current().Annotations, current().Status.Conditions)
		}
	}
	poll("advice written", func(p *v1.Pod) bool {
		c := Current(p)
		return c != nil && p.Annotations[gpuv1.AdviceAnnotation] == `{"options":[2]}` &&
			c.Message == "needs 2 GPUs on one node — H100 2/4 free (at most 1 per node); to admit: wait until 18:00"
	})
	w.Placed(pod, "n1")
	poll("advice removed", func(p *v1.Pod) bool {
		_, has := p.Annotations[gpuv1.AdviceAnnotation]
		c := Current(p)
		return !has && c != nil && c.Status == v1.ConditionFalse
	})
}
