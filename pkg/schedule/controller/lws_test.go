package controller

import (
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// leaderWorkerSet is an LWS named name with groups replicas of size pods: a
// leader claiming leaderTemplate and size-1 workers claiming workerTemplate.
// It carries fields this build does not read (startupPolicy, a label), which
// an update must keep.
func leaderWorkerSet(name string, replicas, size int64, leaderTemplate, workerTemplate string) *unstructured.Unstructured {
	podTemplate := func(role, claimTemplate string) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": name, "role": role}},
			"spec": map[string]any{
				"containers":     []any{map[string]any{"name": "main", "image": "pause"}},
				"resourceClaims": []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": claimTemplate}},
			},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lwsGroupVersion, "kind": lwsKind,
		"metadata": map[string]any{"namespace": ns, "name": name, "generation": int64(1), "labels": map[string]any{"team": "llm"}},
		"spec": map[string]any{
			"replicas":      replicas,
			"startupPolicy": "LeaderReady",
			"leaderWorkerTemplate": map[string]any{
				"size":           size,
				"leaderTemplate": podTemplate("leader", leaderTemplate),
				"workerTemplate": podTemplate("worker", workerTemplate),
			},
		},
		"status": map[string]any{"replicas": replicas, "readyReplicas": replicas, "updatedReplicas": replicas, "observedGeneration": int64(1)},
	}}
}

func (e *env) addLWS(u *unstructured.Unstructured) {
	e.t.Helper()
	if _, err := e.dyn.Resource(LeaderWorkerSetsResource).Namespace(ns).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) lws(name string) *unstructured.Unstructured {
	e.t.Helper()
	u, err := e.dyn.Resource(LeaderWorkerSetsResource).Namespace(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

func (e *env) lwsReplicas(name string) int64 {
	e.t.Helper()
	n, _, err := unstructured.NestedInt64(e.lws(name).Object, "spec", "replicas")
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// settleLWS plays the LeaderWorkerSet controller: status follows spec, every
// group ready.
func (e *env) settleLWS(name string) {
	e.t.Helper()
	u := e.lws(name)
	n := e.lwsReplicas(name)
	for _, f := range []string{"replicas", "readyReplicas", "updatedReplicas"} {
		if err := unstructured.SetNestedField(u.Object, n, "status", f); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := e.dyn.Resource(LeaderWorkerSetsResource).Namespace(ns).Update(e.ctx, u, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// passesWithLWS runs n passes of the "pool" schedule 5 s apart, the
// LeaderWorkerSet's status following its spec after each.
func (e *env) passesWithLWS(n int) {
	e.t.Helper()
	for range n {
		e.mustPass("pool")
		e.settleLWS("lws-llama70b")
		e.clock.Step(5 * time.Second)
	}
}

// installLWSAPI makes discovery serve the LeaderWorkerSet API.
func (e *env) installLWSAPI() {
	e.client.Discovery().(*fakediscovery.FakeDiscovery).Resources = append(e.client.Discovery().(*fakediscovery.FakeDiscovery).Resources,
		&metav1.APIResourceList{GroupVersion: lwsGroupVersion, APIResources: []metav1.APIResource{{Name: "leaderworkersets", Kind: lwsKind, Namespaced: true}}})
}

// lwsSchedule is the week schedule with llama70b served by a LeaderWorkerSet.
func lwsSchedule() *v1alpha1.DeploySchedule {
	ds := weekSchedule()
	ds.Spec.Targets[0].WorkloadRef = v1alpha1.WorkloadReference{APIVersion: lwsGroupVersion, Kind: lwsKind, Name: "lws-llama70b"}
	return ds
}

// lwsPool is the week pool before Monday 08:00 with llama70b as a stopped
// LeaderWorkerSet of groups of a leader and a worker with 4 GPUs each.
func lwsPool(t *testing.T, extra ...runtime.Object) *env {
	t.Helper()
	e := newEnv(t, at(19, 7, 59), append(append(poolObjects(), claimTemplate("gpu4", 4)), extra...)...)
	e.installLWSAPI()
	e.addLWS(leaderWorkerSet("lws-llama70b", 0, 2, "gpu4", "gpu4"))
	e.addSchedule(lwsSchedule())
	e.mustPass("pool")
	return e
}

// At 08:00 the release-first swap scales the LeaderWorkerSet to one group of
// a leader and a worker with 4 GPUs each, after qwen32b released its 6.
func TestLeaderWorkerSetSwap(t *testing.T) {
	e := lwsPool(t)
	e.clock.SetTime(at(19, 8, 0))
	if _, err := e.reconcile("pool"); err != nil {
		t.Fatal(err)
	}
	if got := e.lwsReplicas("lws-llama70b"); got != 0 {
		t.Fatalf("LeaderWorkerSet scaled to %d before qwen32b released its GPUs", got)
	}
	e.settle(true)
	e.passesWithLWS(5)
	e.mustPass("pool")
	if got := e.lwsReplicas("lws-llama70b"); got != 1 {
		t.Fatalf("LeaderWorkerSet replicas = %d, want 1 group", got)
	}
	st := e.targetStatus("pool", "llama70b")
	if st.Phase != v1alpha1.TargetPhaseConverged || len(st.Steps) != 1 || st.Steps[0].Phase != v1alpha1.StepSucceeded {
		t.Fatalf("llama70b = %s/%s %q steps %+v, want Converged with one Succeeded step", st.Phase, st.Reason, st.Message, st.Steps)
	}
	u := e.lws("lws-llama70b")
	if got := u.GetAnnotations()[gpuv1.TransitionKeyAnnotation]; got != st.Steps[0].Key {
		t.Errorf("transition key annotation = %q, want the step's key %q", got, st.Steps[0].Key)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "spec", "startupPolicy"); p != "LeaderReady" {
		t.Errorf("spec.startupPolicy = %q after the update, want LeaderReady kept", p)
	}
	if got := u.GetLabels()["team"]; got != "llm" {
		t.Errorf("label team = %q after the update, want llm kept", got)
	}
	// The stop at 18:00 remembers the group count for an unpinned start.
	e.clock.SetTime(at(19, 18, 0))
	e.passesWithLWS(5)
	if got := e.lwsReplicas("lws-llama70b"); got != 0 {
		t.Fatalf("LeaderWorkerSet replicas at 18:00 = %d, want 0", got)
	}
	if got := e.lws("lws-llama70b").GetAnnotations()[gpuv1.ReplicasBeforeStopAnnotation]; got != "1" {
		t.Errorf("%s = %q, want 1", gpuv1.ReplicasBeforeStopAnnotation, got)
	}
}

// The capacity preview places a whole group: the leader's 4 GPUs fit, the
// worker's 4 do not, so the start waits and says how many pods fit.
func TestLeaderWorkerSetPreviewCountsEveryPodOfAGroup(t *testing.T) {
	e := lwsPool(t, allocatedClaim("outsider", "gpu-node", 8, 2))
	e.clock.SetTime(at(19, 8, 0))
	for range 4 {
		e.mustPass("pool")
		e.clock.Step(5 * time.Second)
	}
	st := e.targetStatus("pool", "llama70b")
	if st.Reason != ReasonCapacityWait || !strings.Contains(st.Message, "1 of 2 pods fit") {
		t.Fatalf("llama70b = %s/%s %q, want %s with 1 of 2 pods fitting", st.Phase, st.Reason, st.Message, ReasonCapacityWait)
	}
	if got := e.lwsReplicas("lws-llama70b"); got != 0 {
		t.Errorf("LeaderWorkerSet scaled to %d without capacity", got)
	}
}

// Quota is charged per pod of a group: leader 4 + worker 4 + bge's 2 = 10
// devices against a hard limit of 9, so the preflight refuses and nothing is
// released.
func TestLeaderWorkerSetQuotaCountsGroupSize(t *testing.T) {
	quota := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpus"},
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourceName(driver + quotaSuffix): resource.MustParse("9")}}}
	e := lwsPool(t, quota)
	e.clock.SetTime(at(19, 8, 0))
	e.mustPass("pool")
	st := e.targetStatus("pool", "llama70b")
	if st.Reason != ReasonQuotaRefused || !strings.Contains(st.Message, "starting 2 pod(s) of target llama70b would use 10") {
		t.Fatalf("llama70b = %s/%s %q, want %s for 2 pods using 10", st.Phase, st.Reason, st.Message, ReasonQuotaRefused)
	}
	if got := e.replicas("md-qwen32b"); got != 1 {
		t.Errorf("qwen32b replicas = %d, want 1 (nothing released)", got)
	}
}

func TestLeaderWorkerSetEligibility(t *testing.T) {
	for name, tc := range map[string]struct {
		setup   func(e *env)
		pin     bool
		wantSub string
	}{
		"CRD installed, object missing": {
			setup:   func(e *env) { e.installLWSAPI() },
			wantSub: IneligibleNotFound,
		},
		"HPA scales it and the window pins replicas": {
			setup: func(e *env) {
				e.installLWSAPI()
				e.addLWS(leaderWorkerSet("lws-llama70b", 0, 2, "gpu8", "gpu8"))
				hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lws-hpa"},
					Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
						APIVersion: lwsGroupVersion, Kind: lwsKind, Name: "lws-llama70b"}, MaxReplicas: 3}}
				if _, err := e.client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(e.ctx, hpa, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			pin:     true,
			wantSub: IneligibleUnsupportedScaleForMode,
		},
		"size below 1": {
			setup: func(e *env) {
				e.installLWSAPI()
				e.addLWS(leaderWorkerSet("lws-llama70b", 0, 0, "gpu8", "gpu8"))
			},
			wantSub: IneligibleInvalidConfig + "}: LeaderWorkerSet lws-llama70b: spec.leaderWorkerTemplate.size is 0",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, at(19, 9, 0), poolObjects()...)
			tc.setup(e)
			ds := lwsSchedule()
			if tc.pin {
				ds.Spec.Windows[0].States[0].Replicas = ptr.To(v1alpha1.Replicas(2))
			}
			e.addSchedule(ds)
			if err := e.pass("pool"); err != nil {
				t.Fatal(err)
			}
			st := e.targetStatus("pool", "llama70b")
			if st.Reason != ReasonIneligible || !strings.Contains(st.Message, tc.wantSub) {
				t.Fatalf("llama70b = %s/%s %q, want Ineligible{%s}", st.Phase, st.Reason, st.Message, tc.wantSub)
			}
		})
	}
}

// An update points both pod templates' claims at the pinned templates and
// keeps claims that use other templates.
func TestSetClaimTemplates(t *testing.T) {
	u := leaderWorkerSet("x", 1, 3, "gpu8", "gpu4")
	for _, path := range [][]string{lwsLeaderTemplatePath, lwsWorkerTemplatePath} {
		if err := setClaimTemplates(u.Object, path, map[string]string{"gpu8": "gpu8-pin-abc"}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := fromLeaderWorkerSet(u)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rc := range w.claimRefs() {
		got = append(got, *rc.ResourceClaimTemplateName)
	}
	if strings.Join(got, ",") != "gpu8-pin-abc,gpu4" {
		t.Errorf("claim templates = %v, want [gpu8-pin-abc gpu4]", got)
	}
	if w.podsPerReplica() != 3 || len(w.Templates) != 2 || w.Templates[1].Pods != 2 {
		t.Errorf("%d pods per group from %d templates, want a leader and 2 workers", w.podsPerReplica(), len(w.Templates))
	}
}
