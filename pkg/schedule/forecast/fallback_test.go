package forecast

import (
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// tiered is one pod asking for n GPUs of the first model of models that a
// node has room for (a firstAvailable request, one subrequest per model).
func tiered(n int64, models ...string) []preview.Demand {
	req := resourceapi.DeviceRequest{Name: "gpu"}
	for _, m := range models {
		req.FirstAvailable = append(req.FirstAvailable, resourceapi.DeviceSubRequest{
			Name: strings.ToLower(m), DeviceClassName: gpuv1.DeviceClassName, Count: n,
			AllocationMode: resourceapi.DeviceAllocationModeExactCount,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf(`device.attributes["gpu.rota.dev"].model == %q`, m)}}},
		})
	}
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}
	return []preview.Demand{{PodClaims: []resourceapi.ResourceClaimSpec{spec}, Pods: 1}}
}

// mixedPool is the pool of issue #40: 8 H100s on n1, 4 A100s on n2.
func mixedPool(in *Input) {
	in.Slices = []*resourceapi.ResourceSlice{nodeSlice("n1", "H100", 8), nodeSlice("n2", "A100", 4)}
}

// byModel renders a segment's GPUs per model: "A100=2 H100=8".
func byModel(d map[string]int) string {
	var parts []string
	for _, m := range []string{"A100", "H100"} {
		parts = append(parts, fmt.Sprintf("%s=%d", m, d[m]))
	}
	return strings.Join(parts, " ")
}

// TestFallbackOverflowsToA100 is the example of issue #40: the week on 8
// H100s and 4 A100s, with md-bge-embed (2 GPUs of any model) running all
// week. Counted against the model most GPUs have, business hours ask for
// 10 of 8 H100s; placed as the scheduler places it, md-bge-embed takes 2
// A100s (the node it strands the fewest GPUs on), llama70b the 8 H100s,
// and nothing is over-committed.
func TestFallbackOverflowsToA100(t *testing.T) {
	in := weekInput(t, nil, nil)
	mixedPool(&in)
	f := runForecast(t, in)
	if len(f.Overcommits) != 0 {
		t.Fatalf("over-commits %+v, want none", f.Overcommits)
	}
	for _, s := range f.Segments {
		want := "A100=2 H100=6"
		if s.Running[week+"llama70b"] > 0 {
			want = "A100=2 H100=8"
		}
		if got := byModel(s.Demand); got != want {
			t.Errorf("%s-%s: %s, want %s", s.From.Format("Mon 15:04"), s.To.Format("Mon 15:04"), got, want)
		}
	}
	if len(f.Fallbacks) != 1 {
		t.Fatalf("fallbacks %+v, want md-bge-embed's all week", f.Fallbacks)
	}
	fb := f.Fallbacks[0]
	if fb.Load != "serving/Deployment/md-bge-embed" || fb.Model != "A100" || fb.Preferred != "H100" || fb.GPUs != 2 ||
		fb.Target || !fb.From.Equal(in.From) || !fb.To.Equal(in.To) {
		t.Errorf("fallback %+v, want md-bge-embed's 2 A100s instead of H100 all week", fb)
	}
	for _, tr := range f.Transitions {
		if len(tr.Over) > 0 {
			t.Errorf("%s: peak %v over %v", tr.At, tr.Peak, tr.Over)
		}
	}
}

// TestFallbackTierNamed: sdxl asks for 4 H100s, else 4 A100s, in business
// hours. llama70b, the larger pod, takes the 8 H100s, so sdxl runs on its
// second tier every weekday; on Wednesday it keeps its A100s through
// maint-wed, when qwen32b replaces llama70b, since a running pod does not
// move.
func TestFallbackTierNamed(t *testing.T) {
	in := weekInput(t, addSDXL, map[string]*Load{"sdxl": {Name: week + "sdxl", Replica: tiered(4, "H100", "A100"), Replicas: 1}})
	in.Always = nil
	mixedPool(&in)
	f := runForecast(t, in)
	if len(f.Overcommits) != 0 {
		t.Fatalf("over-commits %+v, want none", f.Overcommits)
	}
	var got []string
	for _, fb := range f.Fallbacks {
		got = append(got, fmt.Sprintf("%s-%s %s %s", fb.From.In(hcm).Format("Mon 15:04"), fb.To.In(hcm).Format("Mon 15:04"), fb.Load, fb.Text()))
	}
	var want []string
	for _, day := range []string{"Mon", "Tue", "Wed", "Thu", "Fri"} {
		want = append(want, fmt.Sprintf("%s 08:00-%s 18:00 %ssdxl 4 × A100 (tier 2/2 a100) instead of H100", day, day, week))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("fallbacks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range f.Segments {
		if s.Running[week+"sdxl"] > 0 && s.Loads[week+"sdxl"]["A100"] != 4 {
			t.Errorf("%s: sdxl on %v, want 4 A100s", s.From.In(hcm).Format("Mon 15:04"), s.Loads[week+"sdxl"])
		}
	}
}

// TestRunningPodsStay: md-bge-embed asks for 2 H100s, else 2 A100s, and
// starts beside qwen32b: Tiering puts it on the H100 node, its first tier.
// At 08:00 llama70b needs all 8 H100s, but md-bge-embed still holds 2 and a
// running pod does not move: llama70b (8 GPUs of any model) finds no node
// although 10 GPUs are free, 6 H100s and 4 A100s: by fragmentation. The
// pool would fit both were md-bge-embed on the A100s.
func TestRunningPodsStay(t *testing.T) {
	in := weekInput(t, nil, nil)
	in.Always[0].Replica = tiered(2, "H100", "A100")
	mixedPool(&in)
	f := runForecast(t, in)
	if len(f.Overcommits) != 6 {
		t.Fatalf("%d over-commits %+v, want llama70b's 6 stretches", len(f.Overcommits), f.Overcommits)
	}
	for _, oc := range f.Overcommits {
		if oc.Model != "H100" || oc.Reason != ReasonFragmentation || oc.Demand != 10 || oc.Capacity != 8 ||
			strings.Join(oc.Targets, ",") != week+"llama70b" {
			t.Errorf("%+v, want llama70b's 10 of 8 H100s by fragmentation", oc)
		}
	}
	mon := f.Segments[1]
	if len(mon.Unplaced) != 1 || mon.Unplaced[0].Load != week+"llama70b" || mon.Unplaced[0].Reason != ReasonFragmentation ||
		!strings.Contains(mon.Unplaced[0].Detail, "n1=6, n2=4") {
		t.Errorf("Monday 08:00: unplaced %+v, want llama70b by fragmentation, 6 and 4 free", mon.Unplaced)
	}
	if len(f.Fallbacks) != 0 {
		t.Errorf("fallbacks %+v, want none", f.Fallbacks)
	}
}

// TestWeekOnMixedPoolWritten: the table, the JSON lines and the page name
// the fallback.
func TestWeekOnMixedPoolWritten(t *testing.T) {
	in := weekInput(t, nil, nil)
	mixedPool(&in)
	f := runForecast(t, in)
	var table, lines, page strings.Builder
	if err := WriteTable(&table, f, hcm); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, f, hcm, "mixed pool"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"On a fallback model", `<tr class="fallback">`, "2 × A100 instead of H100"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if err := WriteJSON(&lines, f, hcm); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FALLBACK FROM", "serving/Deployment/md-bge-embed  2 × A100 instead of H100", "No over-commit"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	want := `{"type":"fallback","load":"serving/Deployment/md-bge-embed","target":false,"from":"2026-10-19T00:00:00+07:00","to":"2026-10-26T00:00:00+07:00","model":"A100","preferred":"H100","gpus":2}`
	if !strings.Contains(lines.String(), want) {
		t.Errorf("JSON lacks %s:\n%s", want, lines.String())
	}
}

// TestStartsInStepOrder: the controller runs a transition's starts one
// after another, in target order, so the scheduler places sdxl (listed
// first, 4 H100s else 4 A100s) before llama70b (8 GPUs of any model).
// sdxl takes half the H100 node, and llama70b then finds 4 free GPUs on
// each node: over-committed by fragmentation, which placing the larger
// pod first would have hidden.
func TestStartsInStepOrder(t *testing.T) {
	in := weekInput(t, func(ds *v1alpha1.DeploySchedule) {
		addSDXL(ds)
		n := len(ds.Spec.Targets)
		ds.Spec.Targets = append(ds.Spec.Targets[n-1:], ds.Spec.Targets[:n-1]...)
	}, map[string]*Load{"sdxl": {Name: week + "sdxl", Replica: tiered(4, "H100", "A100"), Replicas: 1}})
	in.Always = nil
	mixedPool(&in)
	f := runForecast(t, in)
	mon := f.Segments[1]
	if !mon.From.Equal(at(19, 8, 0)) || modelText(mon.Loads[week+"sdxl"]) != "H100=4" || len(mon.Unplaced) != 1 ||
		mon.Unplaced[0].Load != week+"llama70b" || mon.Unplaced[0].Reason != ReasonFragmentation {
		t.Errorf("Monday 08:00: sdxl on %v, unplaced %+v; want sdxl on 4 H100s and llama70b left out by fragmentation",
			mon.Loads[week+"sdxl"], mon.Unplaced)
	}
	if len(f.Overcommits) == 0 || f.Overcommits[0].Reason != ReasonFragmentation {
		t.Errorf("over-commits %+v, want llama70b's by fragmentation", f.Overcommits)
	}
}

func modelText(per map[string]int) string {
	var parts []string
	for _, m := range []string{"A100", "H100"} {
		if per[m] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", m, per[m]))
		}
	}
	return strings.Join(parts, " ")
}

// TestUnplaceableLoadStillCounts: a workload the forecast cannot place (a
// request of its claim matches no GPU of the pool, so no node would ever
// take it) still counts what its other requests ask for, at first choice:
// 6 H100s beside qwen32b and md-bge-embed over-commit the 10 H100s by
// count, every night.
func TestUnplaceableLoadStillCounts(t *testing.T) {
	in := weekInput(t, nil, nil)
	claim := gpus(6)
	claim[0].PodClaims[0].Devices.Requests = append(claim[0].PodClaims[0].Devices.Requests, resourceapi.DeviceRequest{
		Name: "l4", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: gpuv1.DeviceClassName, Count: 1,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.attributes["gpu.rota.dev"].model == "L4"`}}}},
	})
	in.Always = append(in.Always, Load{Name: "mallory/Deployment/x", Replica: claim, Replicas: 1})
	f := runForecast(t, in)
	if len(f.Overcommits) == 0 {
		t.Fatal("no over-commit, want the nights by count")
	}
	first := f.Overcommits[0]
	if first.Reason != ReasonCount || first.Demand != 14 || first.Capacity != 10 || !first.From.Equal(at(19, 0, 0)) {
		t.Errorf("first over-commit %+v, want 14 of 10 by count from Monday 00:00", first)
	}
}
