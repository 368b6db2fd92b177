package forecast

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

const week = "serving/gpu-pool-h100-shared/"

// weekInput is the week-swap scenario (docs/design.md#scenario-week-swap):
// the week schedule on one node of 10 H100s, with
// md-bge-embed (2 GPUs) that no schedule touches; extra targets may be
// added to the schedule by edit with their loads.
func weekInput(t *testing.T, edit func(*v1alpha1.DeploySchedule), extra map[string]*Load) Input {
	ds, compiled := weekSchedule(t, edit)
	targets := map[string]*Load{
		"llama70b": {Name: week + "llama70b", Replica: gpus(8), Replicas: 1},
		"qwen32b":  {Name: week + "qwen32b", Replica: gpus(6), Replicas: 1},
	}
	for k, v := range extra {
		targets[k] = v
	}
	return Input{
		From: at(19, 0, 0), To: at(26, 0, 0),
		Schedules: []Schedule{{Namespace: ds.Namespace, Name: ds.Name, Compiled: compiled, Targets: targets}},
		Always:    []Load{{Name: "serving/Deployment/md-bge-embed", Replica: gpus(2), Replicas: 1}},
		Slices:    []*resourceapi.ResourceSlice{nodeSlice("gpu-node-0", "H100", 10)},
		Classes:   []*resourceapi.DeviceClass{gpuClass()},
	}
}

func TestWeekOnTenGPUsFits(t *testing.T) {
	f := runForecast(t, weekInput(t, nil, nil))
	if len(f.Overcommits) != 0 {
		t.Fatalf("over-commits %+v, want none", f.Overcommits)
	}
	if f.Capacity["H100"] != 10 {
		t.Errorf("capacity %v, want H100: 10", f.Capacity)
	}
	peak := 0
	for _, s := range f.Segments {
		peak = max(peak, s.Demand["H100"])
	}
	if peak != 10 {
		t.Errorf("peak demand %d, want 10 (llama70b 8 + bge 2 in business hours)", peak)
	}
	// 5 mornings, 5 evenings, Wed 13:00 and 15:00; release-first keeps each
	// swap's peak at the larger side.
	if len(f.Transitions) != 12 {
		t.Fatalf("%d transitions, want 12", len(f.Transitions))
	}
	for _, tr := range f.Transitions {
		if tr.Peak["H100"] > 10 || len(tr.Over) > 0 {
			t.Errorf("%s: peak %v over %v", tr.At, tr.Peak, tr.Over)
		}
	}
	mon := f.Transitions[0]
	if !mon.At.Equal(at(19, 8, 0)) || mon.Before["H100"] != 8 || mon.Peak["H100"] != 10 || mon.After["H100"] != 10 {
		t.Errorf("Monday 08:00: %+v, want before 8, peak 10, after 10", mon)
	}
}

func TestAcquireFirstPeaksDuringTheSwap(t *testing.T) {
	f := runForecast(t, weekInput(t, func(ds *v1alpha1.DeploySchedule) {
		ds.Spec.TransitionOrder = v1alpha1.TransitionOrderAcquireFirst
	}, nil))
	if len(f.Overcommits) != 0 {
		t.Fatalf("over-commits between transitions %+v, want none", f.Overcommits)
	}
	mon := f.Transitions[0]
	// qwen32b 6 + bge 2 + llama70b 8 before qwen32b stops.
	if mon.Peak["H100"] != 16 || len(mon.Over) != 1 || mon.Over[0] != "H100" {
		t.Errorf("Monday 08:00 acquire-first: peak %v over %v, want 16 over H100", mon.Peak, mon.Over)
	}
}

// TestThirdTargetOvercommitsBusinessHours adds sdxl (4 GPUs) to business
// hours. By hand: every weekday 08:00-18:00 runs llama70b 8 + sdxl 4 + bge
// 2 = 14 of 10, except Wednesday's maintenance 13:00-15:00, which stops
// llama70b and starts qwen32b (6) while sdxl, which maint-wed does not
// name, keeps business hours: 6 + 4 + 2 = 12 of 10.
func TestThirdTargetOvercommitsBusinessHours(t *testing.T) {
	f := runForecast(t, weekInput(t, addSDXL, map[string]*Load{"sdxl": {Name: week + "sdxl", Replica: gpus(4), Replicas: 1}}))
	day := []string{week + "llama70b", week + "sdxl"}
	maint := []string{week + "qwen32b", week + "sdxl"}
	type window struct {
		from, to time.Time
		demand   int
		targets  []string
	}
	want := []window{
		{at(19, 8, 0), at(19, 18, 0), 14, day},
		{at(20, 8, 0), at(20, 18, 0), 14, day},
		{at(21, 8, 0), at(21, 13, 0), 14, day},
		{at(21, 13, 0), at(21, 15, 0), 12, maint},
		{at(21, 15, 0), at(21, 18, 0), 14, day},
		{at(22, 8, 0), at(22, 18, 0), 14, day},
		{at(23, 8, 0), at(23, 18, 0), 14, day},
	}
	var got, exp []string
	for _, oc := range f.Overcommits {
		got = append(got, fmt.Sprintf("%s-%s %s %d/%d %s %v %v", oc.From.In(hcm).Format("Mon 15:04"), oc.To.In(hcm).Format("Mon 15:04"),
			oc.Model, oc.Demand, oc.Capacity, oc.Reason, oc.Targets, oc.Others))
	}
	for _, w := range want {
		exp = append(exp, fmt.Sprintf("%s-%s H100 %d/10 count %v [serving/Deployment/md-bge-embed]",
			w.from.Format("Mon 15:04"), w.to.Format("Mon 15:04"), w.demand, w.targets))
	}
	if strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Errorf("over-commits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
}

func addSDXL(ds *v1alpha1.DeploySchedule) {
	ds.Spec.Targets = append(ds.Spec.Targets, v1alpha1.ScheduleTarget{
		Name:         "sdxl",
		WorkloadRef:  v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-sdxl"},
		DefaultState: v1alpha1.StateStopped,
	})
	for i := range ds.Spec.Windows {
		if ds.Spec.Windows[i].Name == "business-hours" {
			ds.Spec.Windows[i].States = append(ds.Spec.Windows[i].States,
				v1alpha1.TargetState{Target: "sdxl", DesiredState: v1alpha1.StateRunning})
		}
	}
}

// TestFragmentation: two nodes of 8 GPUs with 2 held by a reservation on
// each leave 12 free by count, but an 8-GPU replica fits on neither.
func TestFragmentation(t *testing.T) {
	in := weekInput(t, nil, nil)
	in.Always = nil
	reservations := []*v1alpha1.GPUReservation{
		{Spec: v1alpha1.GPUReservationSpec{NodeName: "node-a", Count: ptr.To[int32](2)}},
		{Spec: v1alpha1.GPUReservationSpec{NodeName: "node-b", Count: ptr.To[int32](2)}},
	}
	in.Slices = WithoutReserved([]*resourceapi.ResourceSlice{nodeSlice("node-a", "H100", 8), nodeSlice("node-b", "H100", 8)}, reservations)
	f := runForecast(t, in)
	if f.Capacity["H100"] != 12 || f.Nodes["node-a"]["H100"] != 6 || f.Nodes["node-b"]["H100"] != 6 {
		t.Fatalf("capacity %v per node %v, want 12 = 6 + 6", f.Capacity, f.Nodes)
	}
	// llama70b runs weekdays 08:00-18:00 but Wednesday 13:00-15:00: six
	// stretches; qwen32b's 6 GPUs fit on either node.
	if len(f.Overcommits) != 6 {
		t.Fatalf("%d over-commits %+v, want llama70b's 6 stretches", len(f.Overcommits), f.Overcommits)
	}
	for _, oc := range f.Overcommits {
		if oc.Reason != ReasonFragmentation || oc.Demand != 8 || oc.Capacity != 12 || len(oc.Targets) != 1 || oc.Targets[0] != week+"llama70b" {
			t.Errorf("%+v, want llama70b's 8 of 12 by fragmentation", oc)
		}
		if !strings.Contains(oc.Detail, "node-a=6") || !strings.Contains(oc.Detail, "node-b=6") {
			t.Errorf("detail %q does not give the free GPUs per node", oc.Detail)
		}
	}
}

// TestSchedulesSwappingAtOneInstant: a second schedule, in another zone with
// the same offset, starts sdxl (4 GPUs) at 08:00 when the week schedule
// swaps qwen32b for llama70b. The schedules act independently, so either may
// be at any of its steps: each swap peaks at bge 2 + llama70b 8 + sdxl 4 =
// 14 (qwen32b stops before llama70b starts). Equal instants from the two
// zones make one boundary, not two.
func TestSchedulesSwappingAtOneInstant(t *testing.T) {
	in := weekInput(t, nil, nil)
	ds, _ := weekSchedule(t, nil)
	ds.Name, ds.Spec.TimeZone = "sdxl-daytime", "Asia/Bangkok"
	ds.Spec.Targets = []v1alpha1.ScheduleTarget{{Name: "sdxl", DefaultState: v1alpha1.StateStopped,
		WorkloadRef: v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-sdxl"}}}
	ds.Spec.Windows = ds.Spec.Windows[:1]
	ds.Spec.Windows[0].States = []v1alpha1.TargetState{{Target: "sdxl", DesiredState: v1alpha1.StateRunning}}
	compiled, err := schedule.Compile(ds)
	if err != nil {
		t.Fatal(err)
	}
	in.Schedules = append(in.Schedules, Schedule{Namespace: "serving", Name: "sdxl-daytime", Compiled: compiled,
		Targets: map[string]*Load{"sdxl": {Name: "serving/sdxl-daytime/sdxl", Replica: gpus(4), Replicas: 1}}})
	f := runForecast(t, in)
	for _, s := range f.Segments {
		if !s.From.Before(s.To) {
			t.Errorf("empty segment at %s", s.From)
		}
	}
	if len(f.Segments) != 13 {
		t.Errorf("%d segments, want 13 (the same boundaries as the week alone)", len(f.Segments))
	}
	var got []string
	for _, tr := range f.Transitions {
		if tr.At.Equal(at(19, 8, 0)) {
			got = append(got, fmt.Sprintf("%s %d→%d→%d", tr.Schedule, tr.Before["H100"], tr.Peak["H100"], tr.After["H100"]))
		}
	}
	want := "serving/gpu-pool-h100-shared 8→14→14 serving/sdxl-daytime 8→14→14"
	if strings.Join(got, " ") != want {
		t.Errorf("Monday 08:00: %v, want %s", got, want)
	}
}

// TestBuildFromObjects builds the input as the commands do: an Observe
// schedule changes nothing, so its running workload counts all week, once,
// although its pod holds an allocated claim; a pod no schedule touches
// counts through its claim.
func TestBuildFromObjects(t *testing.T) {
	ds, _ := weekSchedule(t, nil)
	ds.Spec.Mode = v1alpha1.ScheduleModeObserve
	tmpl := &resourceapi.ResourceClaimTemplate{}
	tmpl.Namespace, tmpl.Name = "serving", "six"
	tmpl.Spec.Spec = gpus(6)[0].PodClaims[0]
	qwen := deployment("md-qwen32b", 1, "six")
	llama := deployment("md-llama70b", 0, "six")
	slice := nodeSlice("gpu-node-0", "H100", 10)
	claim := func(name, pod string, devices ...string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{}
		c.Namespace, c.Name = "serving", name
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod}}
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Driver: slice.Spec.Driver, Pool: "gpu-node-0", Device: d, Request: "gpu"})
		}
		return c
	}
	pod := func(name, app string) *v1.Pod {
		p := &v1.Pod{}
		p.Namespace, p.Name, p.Labels = "serving", name, map[string]string{"app": app}
		return p
	}
	in, err := Build(Objects{
		Schedules: []*v1alpha1.DeploySchedule{ds}, Workloads: []Workload{qwen, llama},
		Templates: []*resourceapi.ResourceClaimTemplate{tmpl}, Slices: []*resourceapi.ResourceSlice{slice},
		Classes: []*resourceapi.DeviceClass{gpuClass()},
		Pods:    []*v1.Pod{pod("qwen-1", "md-qwen32b"), pod("bge-1", "md-bge-embed")},
		Claims: []*resourceapi.ResourceClaim{claim("qwen-1-gpu", "qwen-1", "gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"),
			claim("bge-1-gpu", "bge-1", "gpu-6", "gpu-7")},
	}, at(19, 0, 0), at(26, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	f := runForecast(t, in)
	if len(f.Segments) != 1 || f.Segments[0].Demand["H100"] != 8 || len(f.Transitions) != 0 {
		t.Fatalf("segments %+v transitions %d, want one week of qwen32b 6 + bge 2 and no transition", f.Segments, len(f.Transitions))
	}
}

func deployment(name string, replicas int32, template string) Workload {
	return Workload{Namespace: "serving", Kind: "Deployment", Name: name, Replicas: ptr.To(replicas),
		Selector: labels.SelectorFromSet(labels.Set{"app": name}),
		Template: &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}}}}}
}

// TestTenantCannotBreakTheForecast: another tenant's target whose claim
// names a DeviceClass that does not exist, or a selector the allocator
// cannot evaluate, is left out with a note; everyone else's forecast stands.
func TestTenantCannotBreakTheForecast(t *testing.T) {
	noClass := gpus(4)
	noClass[0].PodClaims[0].Devices.Requests[0].Exactly.DeviceClassName = "missing.example.com"
	badCEL := gpus(1)
	badCEL[0].PodClaims[0].Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: `device.attributes["gpu.rota.dev"].model.startsWith(1)`}}}
	f := runForecast(t, weekInput(t, addSDXL, map[string]*Load{"sdxl": {Name: week + "sdxl", Replica: noClass, Replicas: 1}}))
	if len(f.Overcommits) != 0 || len(f.Notes) != 1 || !strings.Contains(f.Notes[0], week+"sdxl left out") {
		t.Errorf("over-commits %v notes %q, want none and sdxl left out", f.Overcommits, f.Notes)
	}
	in := weekInput(t, nil, nil)
	in.Always = append(in.Always, Load{Name: "mallory/Deployment/x", Replica: badCEL, Replicas: 1})
	f = runForecast(t, in)
	if len(f.Overcommits) != 0 || len(f.Transitions) != 12 {
		t.Errorf("over-commits %v, %d transitions: the bad selector changed the forecast", f.Overcommits, len(f.Transitions))
	}
	t.Logf("notes: %q", f.Notes)
}
