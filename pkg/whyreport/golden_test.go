package whyreport

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata from the current output")

// maxLines is how long a `why` may be: read in five seconds.
const maxLines = 12

var t0 = time.Date(2026, 10, 19, 8, 0, 0, 0, time.UTC)

// tier is one tier's per-node counts for the classifier.
type tier struct {
	rank, name string
	need       int
	matching   map[string]int
	free       map[string]int
	tainted    map[string]int
	reserved   map[string]int
	other      int
	unmet      map[string]int
	pinned     map[string]int
}

func (t tier) counts() waits.TierCounts {
	tc := waits.TierCounts{Label: "tier " + t.rank + " " + strings.ToLower(t.name), Tier: t.rank, Name: t.name, Need: t.need,
		Matching: t.matching, Free: orEmpty(t.free), Tainted: orEmpty(t.tainted), Reserved: orEmpty(t.reserved),
		Reservations: map[string]int{}, Preemptible: map[string]int{}, Pinned: orEmpty(t.pinned), OtherModel: t.other, Unmet: t.unmet}
	if t.rank == "" {
		tc.Label = "request gpu"
	}
	for _, n := range t.reserved {
		tc.Reservations["team-a/serving"] += n
	}
	return tc
}

func orEmpty(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// waitingPod is the pod as the WaitReason plugin leaves it after
// classifying a: its condition and its wait-detail annotation.
func waitingPod(t *testing.T, a waits.Attempt) *v1.Pod {
	t.Helper()
	v := waits.Classify(a)
	detail, err := waits.EncodeDetail(v.Detail)
	if err != nil {
		t.Fatal(err)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-5", Annotations: map[string]string{gpuv1.WaitDetailAnnotation: detail}},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: gpuv1.WaitingCondition, Status: v1.ConditionTrue, Reason: string(v.Reason), Message: waits.ConditionMessage(v), LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available: 2 cannot allocate all claims. " + string(v.Reason) + ": " + v.Message},
		}},
	}
}

// events are what the scheduler records for a pod that waits: the wait
// event when the reason appeared, then repeated FailedScheduling.
func events(pod *v1.Pod) []v1.Event {
	c := waits.Current(pod)
	d, _ := waits.CurrentDetail(pod)
	wait := d.Headline
	if wait == "" {
		wait = c.Message
	}
	return []v1.Event{
		{Reason: c.Reason, Type: v1.EventTypeWarning, Message: wait, LastTimestamp: metav1.NewTime(t0)},
		{Reason: "FailedScheduling", Type: v1.EventTypeWarning, Count: 3, LastTimestamp: metav1.NewTime(t0.Add(40 * time.Second)),
			Message: pod.Status.Conditions[1].Message + " Tiering (policy tiering-v1): tier 1/2 h100: 0 of 2 nodes — 1 no free device, 1 constraint not met"},
	}
}

func goldenCases(t *testing.T) map[string]*v1.Pod {
	h100 := tier{rank: "1/2", name: "H100", need: 4, matching: map[string]int{"dgx-h100-0": 8}, other: 8}
	a100 := tier{rank: "2/2", name: "A100", need: 4, matching: map[string]int{"dgx-a100-0": 8}, other: 8}
	spread := tier{name: "H100", need: 2, matching: map[string]int{"n1": 2, "n2": 2}, free: map[string]int{"n1": 1, "n2": 1}}
	conflict := spread
	conflict.pinned = map[string]int{"n1": 1, "n2": 1}
	req := func(ts ...tier) waits.Attempt {
		var tcs []waits.TierCounts
		for _, t := range ts {
			tcs = append(tcs, t.counts())
		}
		return waits.Attempt{Requests: [][]waits.TierCounts{tcs}}
	}
	withAdmission := func(a waits.Attempt, f func(*waits.Attempt)) waits.Attempt { f(&a); return a }
	reserved := tier{name: "H200", need: 2, matching: map[string]int{"n1": 2, "n2": 2}, free: map[string]int{"n1": 1}, reserved: map[string]int{"n2": 1}}
	unhealthy := tier{name: "H100", need: 2, matching: map[string]int{"n1": 2}, free: map[string]int{"n1": 1}, tainted: map[string]int{"n1": 1}}
	oldDriver := tier{rank: "2/2", name: "A100", need: 4, matching: map[string]int{"dgx-a100-0": 0}, other: 8,
		unmet: map[string]int{`device.attributes["gpu.rota.dev"].driverVersion >= "570"`: 8}}
	sameModel := req(tier{name: "H100", need: 4, matching: map[string]int{"mixed-0": 8}, free: map[string]int{"mixed-0": 6}})
	sameModel.DeviceConstraintNodes = []string{"mixed-0"}
	return map[string]*v1.Pod{
		"fallback-both-tiers-full":  waitingPod(t, req(h100, a100)),
		"fallback-unmet-constraint": waitingPod(t, req(h100, oldDriver)),
		"fragmentation":             waitingPod(t, req(spread)),
		"fragmentation-advice":      advised(t, waitingPod(t, req(spread))),
		"fragmentation-conflict":    waitingPod(t, req(conflict)),
		"fragmentation-same-model":  waitingPod(t, sameModel),
		"reservation-reserved":      waitingPod(t, req(reserved)),
		"reservation-not-member": waitingPod(t, withAdmission(req(reserved), func(a *waits.Attempt) {
			a.NotMember = "ReservationNotMember: pod's workload is not a member of GPUReservation team-a/serving"
		})),
		"reservation-overcommitted": waitingPod(t, withAdmission(req(reserved), func(a *waits.Attempt) {
			a.Reservation = "GPUReservation team-a/serving budget is 143771 MiB (1 GPU(s) × 143771 MiB); members hold 81920 MiB in 1 pod(s) and this pod (member d) asks 75776 MiB: 157696 > 143771"
		})),
		"quota": waitingPod(t, withAdmission(req(h100), func(a *waits.Attempt) {
			a.Quota = "tier 1/2 h100 needs 4 more: team-a holds 8 of 8 H100"
		})),
		"gang": waitingPod(t, withAdmission(req(h100), func(a *waits.Attempt) {
			a.Gang = "gang train: 1 of 2 members placed and holding their devices; waiting up to 5m0s for the rest"
		})),
		"unhealthy": waitingPod(t, req(unhealthy)),
		"fairness-turn": waitingPod(t, withAdmission(req(h100), func(a *waits.Attempt) {
			a.Turn = "Fairness: tenant ml waits its turn behind tenant-y/y-0"
		})),
	}
}

// placedPod fell back to A100 after waiting.
func placedPod() (*v1.Pod, []v1.Event) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-4", Annotations: map[string]string{
			gpuv1.TierAnnotation:    "2/2: A100",
			gpuv1.DevicesAnnotation: "dgx-a100-0/gpu-4=GPU-4, dgx-a100-0/gpu-5=GPU-5, dgx-a100-0/gpu-6=GPU-6, dgx-a100-0/gpu-7=GPU-7",
			gpuv1.PassedOverAnnotation: `[{"tier":"1/2","name":"H100","need":4,"matching":16,"free":0,"largestFree":0,"allocated":12,` +
				`"tainted":{"gpu.rota.dev/unhealthy":4}}]`,
		}},
		Spec: v1.PodSpec{NodeName: "dgx-a100-0"},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: gpuv1.WaitingCondition, Status: v1.ConditionFalse, Reason: waits.Placed,
			Message: "placed on node dgx-a100-0 after waiting 3m0s (last reason InsufficientCapacity)", LastTransitionTime: metav1.NewTime(t0)}}},
	}
	evs := []v1.Event{
		{Reason: "TieredPlacement", Type: v1.EventTypeNormal, LastTimestamp: metav1.NewTime(t0),
			Message: "4 × A100 on dgx-a100-0 (gpu-4..7), tier 2/2; H100 tier: 0 of 16 free — 12 allocated, 4 tainted gpu.rota.dev/unhealthy; policy tiering-v1"},
		{Reason: "Scheduled", Type: v1.EventTypeNormal, LastTimestamp: metav1.NewTime(t0),
			Message: "Successfully assigned ml/train-4 to dgx-a100-0"},
	}
	return pod, evs
}

// startFailedPod was placed, but the driver refused its claim at prepare.
func startFailedPod() (*v1.Pod, []v1.Event) {
	prepare := "Failed to prepare dynamic resources: NodePrepareResources for pod ml/serve-1: claim ml/serve-1-gpu: " +
		`GpuConfig for request "gpu": memoryMiB 200000 exceeds the 81559 MiB of gpu-0 (NVIDIA H100 80GB HBM3)`
	msg, _ := waits.StartFailureFromEvent(&v1.Event{Reason: waits.KubeletPrepareFailed, InvolvedObject: v1.ObjectReference{Kind: "Pod"}, Message: prepare}, "dgx-h100-0")
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "serve-1"},
		Spec:       v1.PodSpec{NodeName: "dgx-h100-0"},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: gpuv1.WaitingCondition, Status: v1.ConditionTrue,
			Reason: string(waits.StartFailed), Message: msg, LastTransitionTime: metav1.NewTime(t0.Add(10 * time.Second))}}},
	}
	evs := []v1.Event{
		{Reason: "Scheduled", Type: v1.EventTypeNormal, LastTimestamp: metav1.NewTime(t0), Message: "Successfully assigned ml/serve-1 to dgx-h100-0"},
		{Reason: waits.KubeletPrepareFailed, Type: v1.EventTypeWarning, LastTimestamp: metav1.NewTime(t0.Add(5 * time.Second)), Message: prepare},
		{Reason: string(waits.StartFailed), Type: v1.EventTypeWarning, LastTimestamp: metav1.NewTime(t0.Add(10 * time.Second)), Message: msg},
	}
	return pod, evs
}

// bindingFailedPod was placed, and then the claim the scheduler writes for
// its extended resources was refused by the namespace's ResourceQuota.
func bindingFailedPod() (*v1.Pod, []v1.Event) {
	msg := "placed on node dgx-h100-0, but the placement was undone before binding; the pod's PodScheduled condition has the error, and the scheduler retries it"
	apiErr := `running PreBind plugin "DynamicResources": resourceclaims "serve-2-extended-resources-x7k2p" is forbidden: exceeded quota: rota-gpus, ` +
		`requested: gpu.rota.dev.deviceclass.resource.k8s.io/devices=1, used: gpu.rota.dev.deviceclass.resource.k8s.io/devices=8, limited: gpu.rota.dev.deviceclass.resource.k8s.io/devices=8`
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "serve-2"},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{
			{Type: gpuv1.WaitingCondition, Status: v1.ConditionTrue, Reason: string(waits.BindingFailed), Message: msg, LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "SchedulerError", Message: apiErr, LastTransitionTime: metav1.NewTime(t0)},
		}},
	}
	evs := []v1.Event{
		{Reason: string(waits.BindingFailed), Type: v1.EventTypeWarning, LastTimestamp: metav1.NewTime(t0), Message: msg},
	}
	return pod, evs
}

// TestGolden: `kubectl rota why` for the scenarios (fallback,
// fragmentation, reservation, quota) and every wait reason, as golden
// files under testdata, each at most 12 lines of at most 100 columns,
// no sentence said twice. Regenerate with `go test ./pkg/whyreport -update`
// and review the diff for length and clarity.
func TestGolden(t *testing.T) {
	reports := map[string]Report{}
	for name, pod := range goldenCases(t) {
		reports[name] = Explain(pod, events(pod))
	}
	queued := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-6"}}
	reports["not-attempted"] = Explain(queued, nil)
	placed, evs := placedPod()
	reports["placed-after-fallback"] = Explain(placed, evs)
	notStarted, evs := startFailedPod()
	reports["start-failed"] = Explain(notStarted, evs)
	unbound, evs := bindingFailedPod()
	reports["binding-failed"] = Explain(unbound, evs)

	covered := map[string]bool{}
	for name, r := range reports {
		covered[r.Reason] = true
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := WriteText(&out, r, TextOptions{Width: 100}); err != nil {
				t.Fatal(err)
			}
			checkReadable(t, out.String())
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/whyreport -update)", err)
			}
			if out.String() != string(want) {
				t.Errorf("output differs from %s (-update to accept):\n--- got\n%s--- want\n%s", path, out.String(), want)
			}
		})
	}
	for _, reason := range waits.AllReasons {
		if !covered[string(reason)] {
			t.Errorf("no golden output for reason %s", reason)
		}
	}
}

// checkReadable fails an output longer than maxLines, wider than 100
// columns, or saying one sentence twice.
func checkReadable(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > maxLines {
		t.Errorf("%d lines, want at most %d:\n%s", len(lines), maxLines, out)
	}
	for _, l := range lines {
		if len([]rune(l)) > 100 {
			t.Errorf("line wider than 100 columns: %q", l)
		}
	}
	if dup := Repeated(out); dup != "" {
		t.Errorf("sentence said twice: %q\n%s", dup, out)
	}
}

// TestRepeated: the check the golden outputs pass must catch a sentence
// said twice, as the old `why` did with Message, Analysis and decisions.
func TestRepeated(t *testing.T) {
	old := "Message:  tier 1/2 h100: needs 4 GPUs, 0 free in the pool (none) of 8 matching\n" +
		"Analysis: 0/2 nodes are available; tier 1/2 h100: needs 4 GPUs, 0 free in the pool (none) of 8 matching\n"
	if got := Repeated(old); got != "tier 1/2 h100: needs 4 GPUs, 0 free in the pool (none) of 8 matching" {
		t.Errorf("Repeated = %q, want the tier sentence", got)
	}
	if got := Repeated("Waiting: a\nLast decisions:\n  Quota: as above\n  Gang: as above\n"); got != "" {
		t.Errorf("Repeated = %q for short sentences, want none", got)
	}
}

// TestColorOnlyWhenAsked: colour codes appear only with Color set.
func TestColorOnlyWhenAsked(t *testing.T) {
	pod := goldenCases(t)["fallback-both-tiers-full"]
	r := Explain(pod, nil)
	for _, color := range []bool{false, true} {
		var out bytes.Buffer
		if err := WriteText(&out, r, TextOptions{Width: 100, Color: color}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), "\x1b["); got != color {
			t.Errorf("Color=%v: escape codes present %v:\n%q", color, got, out.String())
		}
	}
}

// advised adds the unblock advice the scheduler writes for the fragmentation
// scenario (docs/design.md#scenario-fragmentation) at t=10 (computed by the advisor) to a waiting pod.
func advised(t *testing.T, pod *v1.Pod) *v1.Pod {
	t.Helper()
	dev := func(node string, i int, holder string) advisor.Device {
		return advisor.Device{ID: fmt.Sprintf("gpu.rota.dev/%s/gpu-%d", node, i), Node: node, Model: "H100", Holder: holder}
	}
	snap := &advisor.Snapshot{Devices: []advisor.Device{dev("n1", 0, "team-a/a-2"), dev("n1", 1, ""), dev("n2", 0, "team-a/a-1"), dev("n2", 1, "")}}
	h100 := func(n int) advisor.Tier {
		tr := advisor.Tier{Name: "gpu", Model: "H100", Count: n, Devices: map[string]bool{}}
		for _, d := range snap.Devices {
			tr.Devices[d.ID] = true
		}
		return tr
	}
	for _, a := range []struct{ name, node string }{{"a-1", "n2"}, {"a-2", "n1"}} {
		snap.Running = append(snap.Running, advisor.Workload{Key: "team-a/" + a.name, Namespace: "team-a", Pinned: "nodeSelector kubernetes.io/hostname=" + a.node,
			Held: []string{"gpu.rota.dev/" + a.node + "/gpu-0"}, Groups: []advisor.Group{{Requests: []advisor.Request{{Name: "gpu", Tiers: []advisor.Tier{h100(1)}}}}}})
	}
	unit := &advisor.Workload{Key: "ml/train-5", Namespace: "ml", Groups: []advisor.Group{{Pods: []string{"ml/train-5"}, Requests: []advisor.Request{{Name: "gpu", Tiers: []advisor.Tier{h100(2)}}}}}}
	adv := advisor.Advise(snap, unit, advisor.Options{})
	raw, err := json.Marshal(adv)
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[gpuv1.AdviceAnnotation] = string(raw)
	pod.Status.Conditions[0].Message += waits.AdviceSeparator + string(adv.Options[0].Kind) + ": " + adv.Options[0].Summary
	return pod
}

// TestAdviceInJSON: `why -o json` carries the advice as advice[], and the
// verdict keeps only the headline before it.
func TestAdviceInJSON(t *testing.T) {
	pod := advised(t, waitingPod(t, waits.Attempt{Requests: [][]waits.TierCounts{{{Label: "request gpu", Name: "H100", Need: 2,
		Matching: map[string]int{"n1": 2, "n2": 2}, Free: map[string]int{"n1": 1, "n2": 1}}}}}))
	r := Explain(pod, nil)
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Verdict string           `json:"verdict"`
		Advice  []advisor.Option `json:"advice"`
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Advice) != 2 || back.Advice[0].Kind != advisor.KindMove || back.Advice[0].Steps[0].Workload != "team-a/a-2" || back.Advice[0].Steps[0].Action != "evict" {
		t.Errorf("advice %+v, want two move plans, the first evicting team-a/a-2", back.Advice)
	}
	if strings.Contains(back.Verdict, waits.AdviceSeparator) || len(r.Tiers) != 1 {
		t.Errorf("verdict %q with %d tiers, want the headline alone and its tier", back.Verdict, len(r.Tiers))
	}
}
