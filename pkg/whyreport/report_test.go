package whyreport

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

func TestExplain(t *testing.T) {
	t0 := time.Date(2026, 10, 19, 8, 0, 0, 0, time.UTC)
	waiting := v1.PodCondition{Type: "rota.dev/Waiting", Status: v1.ConditionTrue, Reason: "TopologyFragmentation", Message: "request gpu: needs 2 GPUs on one node", LastTransitionTime: metav1.NewTime(t0)}
	unsched := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available"}
	pod := func(node string, ann map[string]string, conds ...v1.PodCondition) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "b-0", Annotations: ann},
			Spec:       v1.PodSpec{NodeName: node},
			Status:     v1.PodStatus{Conditions: conds},
		}
	}
	ev := func(sec int, reason, msg string) v1.Event {
		return v1.Event{Reason: reason, Message: msg, Type: v1.EventTypeWarning, LastTimestamp: metav1.NewTime(t0.Add(time.Duration(sec) * time.Second))}
	}
	cases := map[string]struct {
		pod  *v1.Pod
		evs  []v1.Event
		want Report
	}{
		"waiting with a reason, newest decision first, other events left out": {
			pod: pod("", nil, waiting, unsched),
			evs: []v1.Event{ev(1, "FailedScheduling", "first"), ev(2, "TopologyFragmentation", "second"), ev(3, "Pulled", "not a decision")},
			want: Report{Pod: "team-b/b-0", Verdict: "Waiting: request gpu: needs 2 GPUs on one node", Waiting: true, Reason: "TopologyFragmentation", Message: "request gpu: needs 2 GPUs on one node", Since: t0,
				Analysis: "0/2 nodes are available", Decisions: []Event{
					{Time: t0.Add(2 * time.Second), Type: "Warning", Reason: "TopologyFragmentation", Message: "second"},
					{Time: t0.Add(time.Second), Type: "Warning", Reason: "FailedScheduling", Message: "first"},
				}},
		},
		"a wait detail that no longer matches the condition is left out": {
			pod: pod("", map[string]string{gpuv1.WaitDetailAnnotation: `{"headline":"older","tiers":[{"name":"H100","need":2}]}`}, waiting),
			want: Report{Pod: "team-b/b-0", Verdict: "Waiting: request gpu: needs 2 GPUs on one node", Waiting: true, Reason: "TopologyFragmentation",
				Message: "request gpu: needs 2 GPUs on one node", Since: t0},
		},
		"never attempted": {
			pod:  pod("", nil),
			want: Report{Pod: "team-b/b-0", Verdict: "Waiting: queued; the scheduler has not reported an attempt yet", Waiting: true, Reason: "NotAttempted", Message: "queued; the scheduler has not reported an attempt yet"},
		},
		"placed without waiting, with its tier": {
			pod:  pod("n1", map[string]string{"rota.dev/tier": "2/2: A100"}),
			want: Report{Pod: "team-b/b-0", Verdict: "Placed on node n1 without waiting; tier 2/2: A100", Node: "n1", Reason: "Placed", Message: "placed on node n1 without waiting", Tier: "2/2: A100"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Explain(tc.pod, tc.evs), cmpopts.IgnoreUnexported(Report{})); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteWhyFitsWidth(t *testing.T) {
	r := Report{Pod: "team-b/b-0", Verdict: "Waiting: needs 2 GPUs on one node — H100 2/4 free", Waiting: true, Reason: "TopologyFragmentation",
		Message: "request gpu: needs 2 GPUs on one node; 2 free in the pool but spread (n1: 1, n2: 1), largest free block 1 on n1; preemption would not help: evicting every lower-priority pod leaves at most 1 free on one node (n1)"}
	var out bytes.Buffer
	if err := WriteText(&out, r, TextOptions{Width: 60}); err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		if len([]rune(string(line))) > 60 {
			t.Errorf("line longer than 60 columns: %q", line)
		}
	}
}

// A waiting pod with a reclaim under way: `why` says what is reclaimed
// from whom and how long each checkpoint grace has left.
func TestReclaimInWhy(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	raw := `{"tenant":"team-a","unit":"team-a/gang:train","model":"H100","need":4,"used":0,"guaranteed":8,"started":"2026-12-06T10:00:00Z",` +
		`"victims":[{"workload":"team-b/b-7","pods":["team-b/b-7"],"gpus":2,"graceUntil":"2026-12-06T10:01:30Z"},{"workload":"team-b/b-6","pods":["team-b/b-6"],"gpus":2}]}`
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-0", Annotations: map[string]string{gpuv1.ReclaimAnnotation: raw}},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: "rota.dev/Waiting", Status: v1.ConditionTrue, Reason: "GangIncomplete", Message: "gang train needs 4 GPUs", LastTransitionTime: metav1.NewTime(t0)}}}}
	r := Explain(pod, nil)
	r.DescribeReclaim(t0.Add(20*time.Second), func(_, name string) bool { return name == "b-6" })
	var out bytes.Buffer
	if err := WriteText(&out, r, TextOptions{Width: 200}); err != nil {
		t.Fatal(err)
	}
	want := "Reclaim: reclaiming 4 H100 for team-a's guarantee (holds 0 of 8, needs 4) from borrowers team-b/b-7 (2 GPUs; checkpoint grace 1m10s left), team-b/b-6 (2 GPUs; evicted)"
	if !bytes.Contains(out.Bytes(), []byte(want)) {
		t.Errorf("why:\n%s\nlacks %q", out.String(), want)
	}
	pod.Spec.NodeName = "n2"
	if r := Explain(pod, nil); r.Reclaim != nil {
		t.Error("a placed pod reports no reclaim")
	}
}
