package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/pkg/whyreport"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestWhyExplainsFallbackPlacement is issue 19 point 4: a pod placed on its
// fallback tier says, in its TieredPlacement Event and in `kubectl rota
// why` (text and -o json), why every H100 was not used, with the numbers:
// 12 allocated to other pods, 4 tainted unhealthy by the driver, 4 held by
// a GPUReservation's taint rule the pod does not tolerate, 4 on a node its
// node selector excludes.
func TestWhyExplainsFallbackPlacement(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	training := map[string]string{"pool": "training"}
	labelled := func(n *v1.Node) *v1.Node {
		for k, v := range training {
			n.Labels[k] = v
		}
		return n
	}
	// dgx-h100-0 and -1: 8 H100 each, gpu-6 and gpu-7 unhealthy.
	unhealthy := framework.H100
	unhealthy.Taints = []resourceapi.DeviceTaint{framework.UnhealthyTaint}
	halfSick := append(framework.GPUs(framework.H100, 6), unhealthy, unhealthy)
	cp.Create(t, framework.Namespace("ml"), framework.DeviceClass(),
		labelled(framework.Node("dgx-h100-0")), framework.GPUSlice("dgx-h100-0", halfSick...),
		labelled(framework.Node("dgx-h100-1")), framework.GPUSlice("dgx-h100-1", halfSick...),
		// Outside the pod's node selector.
		framework.Node("dgx-h100-2"), framework.GPUSlice("dgx-h100-2", framework.GPUs(framework.H100, 4)...),
		// Held by team-x's reservation (the rule its controller writes).
		labelled(framework.Node("dgx-h100-3")), framework.GPUSlice("dgx-h100-3", framework.GPUs(framework.H100, 4)...),
		labelled(framework.Node("dgx-a100-0")), framework.GPUSlice("dgx-a100-0", framework.GPUs(framework.A100, 8)...))
	rule := &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rota-team-x-nightly-dgx-h100-3"},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(gpuv1.DriverName), Pool: ptr.To("dgx-h100-3")},
			Taint: resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: gpuv1.ReservedTaintValue("team-x", "nightly"),
				Effect: resourceapi.DeviceTaintEffectNoSchedule},
		},
	}
	if _, err := cp.Client.ResourceV1().DeviceTaintRules().Create(context.Background(), rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.StartScheduler(t)

	sixH100 := framework.TieredClaimTemplate("ml", "six-h100", framework.ModelTier("H100"))
	sixH100.Spec.Spec.Devices.Requests[0].FirstAvailable[0].Count = 6
	tmpl := framework.TieredClaimTemplate("ml", "h100-else-a100", framework.ModelTier("H100"), framework.ModelTier("A100"))
	for i := range tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable {
		tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable[i].Count = 4
	}
	cp.Create(t, sixH100, tmpl)
	for _, name := range []string{"serve-0", "serve-1"} {
		cp.Create(t, framework.GPUPod("ml", name, sched, "six-h100"))
		cp.WaitForPodBound(t, "ml", name)
	}
	train := framework.GPUPod("ml", "train", sched, "h100-else-a100")
	train.Spec.NodeSelector = training
	cp.Create(t, train)
	placed := cp.WaitForPodBound(t, "ml", "train")
	if placed.Spec.NodeName != "dgx-a100-0" {
		t.Fatalf("train placed on %s, want dgx-a100-0 (its fallback tier)", placed.Spec.NodeName)
	}

	const why = "H100 tier: 0 of 24 free — 12 allocated, 4 tainted gpu.rota.dev/unhealthy, " +
		"4 reserved by a GPUReservation of another namespace, 4 on nodes the pod's node selector or affinity excludes"
	var notes []string
	framework.WaitFor(t, "TieredPlacement event on train", func(context.Context) (bool, string, error) {
		notes = cp.PodEventNotes(t, placed, "TieredPlacement")
		return len(notes) == 1, strings.Join(notes, " | "), nil
	})
	if want := "4 × A100 on dgx-a100-0 (gpu-0..3), tier 2/2; " + why + "; policy "; !strings.HasPrefix(notes[0], want) {
		t.Errorf("TieredPlacement of train:\n %q\nwant it to start with\n %q", notes[0], want)
	}

	text := runKubectlRota(t, cp, "why", "train", "-n", "ml")
	t.Logf("kubectl rota why -n ml train:\n%s", text)
	// Wrapped at 100 columns: compare the words.
	if words := strings.Join(strings.Fields(text), " "); !strings.Contains(words, "Passed over: "+why+" Devices: ") {
		t.Errorf("kubectl rota why: no passed-over line %q", why)
	}
	if dup := whyreport.Repeated(text); dup != "" {
		t.Errorf("kubectl rota why says %q twice", dup)
	}
	var report struct {
		Node       string             `json:"node"`
		PassedOver []waits.PassedTier `json:"passedOver"`
	}
	out := runKubectlRota(t, cp, "why", "train", "-n", "ml", "-o", "json")
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("kubectl rota why -o json: %v\n%s", err, out)
	}
	want := []waits.PassedTier{{Tier: "1/2", Name: "H100", Need: 4, Matching: 24, Free: 0, Allocated: 12, Excluded: 4,
		Tainted: map[string]int{"gpu.rota.dev/unhealthy": 4}, Reserved: map[string]int{waits.OtherNamespaces: 4}}}
	if report.Node != "dgx-a100-0" || len(report.PassedOver) != 1 || report.PassedOver[0].Line() != want[0].Line() ||
		report.PassedOver[0].Tier != "1/2" || report.PassedOver[0].Need != 4 {
		t.Errorf("kubectl rota why -o json: node %q, passedOver %+v; want dgx-a100-0 and %+v", report.Node, report.PassedOver, want)
	}
}
