package waits

import (
	"context"
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

// TestWriterEventsAndDetail: the writer emits a wait event with the
// one-line headline only when the reason changes, keeps the condition
// (short message: the headline) and the wait-detail annotation current, and removes the annotation once the
// pod is placed.
func TestWriterEventsAndDetail(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-5"}}
	client := fake.NewClientset(pod)
	rec := events.NewFakeRecorder(10)
	w := NewWriter(client, rec, clocktesting.NewFakePassiveClock(time.Date(2026, 10, 19, 8, 0, 0, 0, time.UTC)))
	w.Run(ctx, 1)

	full := func(free int) Verdict {
		h := TierCounts{Label: "tier 1/2 h100", Tier: "1/2", Name: "H100", Need: 4, Matching: map[string]int{"n1": 8}, Free: map[string]int{"n1": free}}
		return Classify(Attempt{Requests: [][]TierCounts{{h}}})
	}
	w.Wait(pod, full(0))
	w.Wait(pod, full(1)) // same reason, other numbers: no second event
	frag := Classify(Attempt{Requests: [][]TierCounts{{{Label: "request gpu", Name: "H100", Need: 2,
		Matching: map[string]int{"n1": 2, "n2": 2}, Free: map[string]int{"n1": 1, "n2": 1}}}}})
	w.Wait(pod, frag)

	want := []string{
		"Warning InsufficientCapacity needs 4 GPUs on one node — H100 0/8 free",
		"Warning TopologyFragmentation needs 2 GPUs on one node — H100 2/4 free (at most 1 per node)",
	}
	for _, e := range want {
		select {
		case got := <-rec.Events:
			if got != e {
				t.Errorf("event %q, want %q", got, e)
			}
		default:
			t.Errorf("missing event %q", e)
		}
	}
	select {
	case got := <-rec.Events:
		t.Errorf("unexpected event %q", got)
	default:
	}

	current := func() *v1.Pod {
		p, err := client.CoreV1().Pods("ml").Get(ctx, "train-5", metav1.GetOptions{})
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
			t.Fatalf("%s: %v; pod %+v", what, err, current().Annotations)
		}
	}
	poll("fragmentation written", func(p *v1.Pod) bool {
		d, ok := CurrentDetail(p)
		c := Current(p)
		return ok && c != nil && c.Reason == string(TopologyFragmentation) && d.Headline == frag.Detail.Headline && len(d.Tiers) == 1 &&
			c.Message == "needs 2 GPUs on one node — H100 2/4 free (at most 1 per node)"
	})
	w.Placed(current(), "n1")
	poll("detail removed once placed", func(p *v1.Pod) bool {
		_, has := p.Annotations[gpuv1.WaitDetailAnnotation]
		c := Current(p)
		return !has && c != nil && c.Reason == Placed
	})
}
