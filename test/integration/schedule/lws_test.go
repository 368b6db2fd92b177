package schedule

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/test/integration/framework/leaderworkerset"
)

// lwsPodTemplate is a pod template of a LeaderWorkerSet whose pods each take
// the GPUs of claimTemplate, scheduled by Rota's scheduler.
func lwsPodTemplate(app, role, claimTemplate string) map[string]any {
	tmpl := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app, "role": role}},
		Spec: v1.PodSpec{
			SchedulerName:                 schedName,
			TerminationGracePeriodSeconds: ptr.To[int64](grace),
			ResourceClaims:                []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(claimTemplate)}},
			Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		panic(err)
	}
	return obj
}

// gpuLeaderWorkerSet creates a LeaderWorkerSet of replicas groups, each a
// leader and size-1 workers taking gpus GPUs per pod.
func (e *env) gpuLeaderWorkerSet(name string, replicas, size, gpus int64) {
	e.t.Helper()
	for _, role := range []string{"leader", "worker"} {
		if _, err := e.cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(e.ctx, gpuTemplate(name+"-"+role, gpus), metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"replicas":      replicas,
			"startupPolicy": "LeaderCreated",
			"leaderWorkerTemplate": map[string]any{
				"size":           size,
				"leaderTemplate": lwsPodTemplate(name, "leader", name+"-leader"),
				"workerTemplate": lwsPodTemplate(name, "worker", name+"-worker"),
			},
		},
	}}
	if _, err := e.cp.Dynamic.Resource(controller.LeaderWorkerSetsResource).Namespace(ns).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) lwsReplicas(name string) int64 {
	e.t.Helper()
	u, err := e.cp.Dynamic.Resource(controller.LeaderWorkerSetsResource).Namespace(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return n
}

// the week-swap scenario (docs/design.md#scenario-week-swap) with the day model served by a
// LeaderWorkerSet, run by the real LeaderWorkerSet controller (sigs.k8s.io/lws
// with its CRD and webhooks, and the StatefulSet controller and garbage
// collector it relies on): one group of a leader and a worker with 4 GPUs
// each, stopped at 18:00 without consent to downtime. At 08:00
// qwen32b is stopped first; the group's pods are created only after
// qwen32b's pod is gone and its 6 GPUs are deallocated, and both land on the
// pool's node. At 18:00 it is reversed. The pool's 10 GPUs are never
// exceeded and the embedding service is never touched.
func TestLeaderWorkerSetSwap(t *testing.T) {
	e := newEnv(t, at(19, 7, 0), map[string]int{"gpu-node-0": 10})
	leaderworkerset.Start(t, e.cp)
	obs := startObserver(t, e.cp.Client, ns)
	e.gpuLeaderWorkerSet("lws-llama70b", 0, 2, 4)
	e.gpuDeployment("md-qwen32b", 1, 6)
	e.gpuDeployment("md-bge-embed", 1, 2)
	e.waitReady("md-qwen32b", 1)
	e.waitReady("md-bge-embed", 1)
	bgePods := e.podNames("md-bge-embed")

	ds := weekSchedule(t)
	ds.Spec.Targets[0].WorkloadRef = v1alpha1.WorkloadReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "lws-llama70b"}
	// No consent to downtime: the 18:00 stop must not take the set's own
	// headless Service for an alias.
	ds.Spec.Targets[0].DefaultAllowDowntime = false
	e.createScheduleObject(ds)
	e.startController(nil)
	e.convergedSince(ds.Name, at(19, 7, 0), 50)

	e.clock.SetTime(at(19, 8, 0))
	e.convergedSince(ds.Name, at(19, 8, 0), 400)
	if got, q := e.lwsReplicas("lws-llama70b"), e.replicas("md-qwen32b"); got != 1 || q != 0 {
		t.Fatalf("08:00: LeaderWorkerSet %d groups, qwen32b %d replicas; want 1 and 0", got, q)
	}
	nodes := map[string]string{}
	for _, pod := range e.pods("lws-llama70b") {
		if pod.DeletionTimestamp == nil {
			nodes[pod.Name] = pod.Spec.NodeName
		}
	}
	if len(nodes) != 2 || nodes["lws-llama70b-0"] != "gpu-node-0" || nodes["lws-llama70b-0-1"] != "gpu-node-0" {
		t.Fatalf("08:00: LeaderWorkerSet pods on %v, want leader lws-llama70b-0 and worker lws-llama70b-0-1 on gpu-node-0", nodes)
	}
	st := e.targetStatus(ds.Name, "llama70b")
	if len(st.Steps) != 1 || st.Steps[0].Phase != v1alpha1.StepSucceeded {
		t.Fatalf("08:00: llama70b %s", describe(st))
	}
	expectMessage(t, "llama70b step", st.Steps[0].Message, "LeaderWorkerSet lws-llama70b at 1 ready replicas")

	// The set's own headless Service (the controller's, for its pods to
	// find their leader) selects every pod of the set; it is no alias, so
	// the 18:00 stop needs no consent.
	svc, err := e.cp.Client.CoreV1().Services(ns).Get(e.ctx, "lws-llama70b", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the LeaderWorkerSet's headless Service: %v", err)
	}
	if ref := metav1.GetControllerOf(svc); ref == nil || ref.Kind != "LeaderWorkerSet" || len(svc.Spec.Selector) == 0 {
		t.Fatalf("Service lws-llama70b: controller %v, selector %v; want the LeaderWorkerSet's own, selecting its pods", ref, svc.Spec.Selector)
	}

	e.clock.SetTime(at(19, 18, 0))
	e.convergedSince(ds.Name, at(19, 18, 0), 400)
	if got, q := e.lwsReplicas("lws-llama70b"), e.replicas("md-qwen32b"); got != 0 || q != 1 {
		t.Fatalf("18:00: LeaderWorkerSet %d groups, qwen32b %d replicas; want 0 and 1", got, q)
	}

	// What the watches saw, in etcd revision order: no pod of one model
	// appeared while the other still had pods or allocated GPUs.
	maxGPUs, starts := 0, map[string]int{}
	obs.replay(func(s *clusterState, r observation) {
		maxGPUs = max(maxGPUs, s.gpus())
		if r.kind != "pod" || !r.alive {
			return
		}
		if _, seen := s.pods[r.name]; seen {
			return
		}
		other := map[string]string{"lws-llama70b": "md-qwen32b", "md-qwen32b": "lws-llama70b"}[r.owner]
		if other == "" {
			return
		}
		starts[r.owner]++
		if pods, devices := s.podsOf(other); pods != 0 || devices != 0 {
			t.Errorf("pod %s of %s created at rv %d while %s still had %d pods and %d allocated GPUs", r.name, r.owner, r.rv, other, pods, devices)
		}
	})
	if maxGPUs > 10 {
		t.Errorf("GPUs in use peaked at %d, want at most 10", maxGPUs)
	}
	if starts["lws-llama70b"] != 2 || starts["md-qwen32b"] != 2 {
		t.Errorf("pods created = %v, want 2 of the LeaderWorkerSet (leader, worker) and 2 of qwen32b (before 08:00, after 18:00)", starts)
	}
	if got := e.podNames("md-bge-embed"); len(got) != 1 || got[0] != bgePods[0] {
		t.Errorf("md-bge-embed pods changed: %v -> %v", bgePods, got)
	}
	t.Logf("peak GPUs in use: %d of 10", maxGPUs)
}
