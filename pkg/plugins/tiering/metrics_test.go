package tiering

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// TestPostBindRecordsPlacement: a bound tiered pod is counted under its
// tier, model and namespace, and PostBind writes nothing to the pod (its
// tier annotation came with the Binding).
func TestPostBindRecordsPlacement(t *testing.T) {
	e := newEnv(t, []*v1.Node{testNode("node-a"), testNode("node-b")},
		[]*resourceapi.ResourceSlice{testSlice("node-a", gpus("A100", 80, 1)...), testSlice("node-b", gpus("L4", 24, 1)...)},
		[]*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100", "A100", "L4")})
	pod := testPod("p")
	if _, err := e.client.CoreV1().Pods(pod.Namespace).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	placements := e.tiering.metrics.placements.WithLabelValues("2", "A100", "default")
	before, err := testutil.GetCounterMetricValue(placements)
	if err != nil {
		t.Fatal(err)
	}

	_, cs := e.cycle(t, pod)
	if st := e.dr.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
		t.Fatalf("DynamicResources Reserve: %v", st)
	}
	if st := e.tiering.Reserve(e.ctx, cs, pod, "node-a"); !st.IsSuccess() {
		t.Fatalf("Tiering Reserve: %v", st)
	}
	e.tiering.PostBind(e.ctx, cs, pod, "node-a")

	for _, a := range e.client.Actions() {
		if a.GetResource().Resource == "pods" && (a.GetVerb() == "patch" || a.GetVerb() == "update") {
			t.Errorf("PostBind wrote to the pod: %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	after, err := testutil.GetCounterMetricValue(placements)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 1 {
		t.Errorf("placements{tier=2,model=A100,namespace=default} grew by %v, want 1", after-before)
	}
}

// TestBindingFailuresStartAtZero: every (cause, stage) pair the plugin can
// count is exported at 0 before any failure, so that the binding-failure
// alerts (manifests/monitoring) see the first one.
func TestBindingFailuresStartAtZero(t *testing.T) {
	m := newMetrics()
	reg := metrics.NewKubeRegistry()
	reg.MustRegister(m.bindingFailures)
	m.initBindingFailures()
	want := `
# HELP rota_tiering_binding_failures_total [ALPHA] Placements of tiered pods that could not be bound, by cause (BindingConflict, StaleResourceSlice, NodeLost, DeviceTainted, BindError) and stage (reserve, prebind, bind).
# TYPE rota_tiering_binding_failures_total counter
rota_tiering_binding_failures_total{cause="BindError",stage="bind"} 0
rota_tiering_binding_failures_total{cause="BindingConflict",stage="bind"} 0
rota_tiering_binding_failures_total{cause="DeviceTainted",stage="prebind"} 0
rota_tiering_binding_failures_total{cause="DeviceTainted",stage="reserve"} 0
rota_tiering_binding_failures_total{cause="NodeLost",stage="prebind"} 0
rota_tiering_binding_failures_total{cause="NodeLost",stage="reserve"} 0
rota_tiering_binding_failures_total{cause="StaleResourceSlice",stage="prebind"} 0
rota_tiering_binding_failures_total{cause="StaleResourceSlice",stage="reserve"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rota_tiering_binding_failures_total"); err != nil {
		t.Error(err)
	}
}
