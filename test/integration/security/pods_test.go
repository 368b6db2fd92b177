package security

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestGPUPodsScheduledByRota: issue #16 points 1 and 7 (priority). A pod
// that may get Rota's GPUs is routed to rota-scheduler or refused with a
// message that says what to set; the exemption and the allowed
// PriorityClasses are the cluster admin's parameter object, out of a
// tenant's reach; the routed pod is placed by Rota.
func TestGPUPodsScheduledByRota(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	extended := func(name, scheduler string) *v1.Pod {
		p := gpuPod(teamA, name, scheduler)
		p.Spec.ResourceClaims = nil
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: v1.ResourceList{
			"deviceclass.resource.kubernetes.io/" + gpuv1.DeviceClassName: resource.MustParse("1"),
		}}
		return p
	}
	createAsAlice := func(p *v1.Pod) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := e.alice.CoreV1().Pods(p.Namespace).Create(ctx, p, dryRun)
			return err
		}
	}

	t.Run("a claim pod on the default scheduler is routed to Rota", func(t *testing.T) {
		p, err := e.alice.CoreV1().Pods(teamA).Create(ctx, gpuPod(teamA, "routed", v1.DefaultSchedulerName), dryRun)
		if err != nil || p.Spec.SchedulerName != rotaScheduler {
			t.Fatalf("pod: %v, schedulerName %q, want it routed to %s", err, p.Spec.SchedulerName, rotaScheduler)
		}
		p, err = e.alice.CoreV1().Pods(teamA).Create(ctx, extended("routed-extended", v1.DefaultSchedulerName), dryRun)
		if err != nil || p.Spec.SchedulerName != rotaScheduler {
			t.Fatalf("extended-resource pod: %v, schedulerName %q, want %s", err, p.Spec.SchedulerName, rotaScheduler)
		}
		plain := gpuPod(teamA, "plain", v1.DefaultSchedulerName)
		plain.Spec.ResourceClaims, plain.Spec.Containers[0].Resources = nil, v1.ResourceRequirements{}
		if p, err = e.alice.CoreV1().Pods(teamA).Create(ctx, plain, dryRun); err != nil || p.Spec.SchedulerName != v1.DefaultSchedulerName {
			t.Fatalf("a pod without devices: %v, schedulerName %q, want it left on %s", err, p.Spec.SchedulerName, v1.DefaultSchedulerName)
		}
	})

	l.hostile(t, "claim pod on another scheduler", createAsAlice(gpuPod(teamA, "other", "my-scheduler")),
		"rota-gpu-pods", "spec.schedulerName", "set spec.schedulerName: rota-scheduler")
	l.hostile(t, "DRA extended-resource pod on another scheduler", createAsAlice(extended("ext", "my-scheduler")),
		"spec.schedulerName", "set spec.schedulerName: rota-scheduler")
	initExt := gpuPod(teamA, "init-ext", "my-scheduler")
	initExt.Spec.ResourceClaims, initExt.Spec.Containers[0].Resources = nil, v1.ResourceRequirements{}
	initExt.Spec.InitContainers = []v1.Container{{Name: "init", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{"deviceclass.resource.kubernetes.io/timesliced.gpu.rota.dev": resource.MustParse("1")},
		Limits:   v1.ResourceList{"deviceclass.resource.kubernetes.io/timesliced.gpu.rota.dev": resource.MustParse("1")},
	}}}
	l.hostile(t, "init container's extended resource on another scheduler", createAsAlice(initExt), "spec.schedulerName")
	bound := gpuPod(teamA, "bound", rotaScheduler)
	bound.Spec.NodeName = "gpu-node"
	l.hostile(t, "claim pod that names its node itself", createAsAlice(bound), "spec.nodeName", "remove spec.nodeName")

	// The exemption is the cluster admin's, not a label or an object a
	// namespace owner controls.
	l.hostile(t, "tenant labels its namespace exempt", func(ctx context.Context) error {
		patch := []byte(`{"metadata":{"labels":{"rota.dev/reservation-admission":"exempt"}}}`)
		_, err := e.alice.CoreV1().Namespaces().Patch(ctx, teamA, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}, "forbidden")
	l.hostile(t, "tenant edits the exemption list", func(ctx context.Context) error {
		patch := []byte(`{"data":{"exemptNamespaces":"team-a"}}`)
		_, err := e.alice.CoreV1().ConfigMaps(paramsNS).Patch(ctx, paramsName, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}, "forbidden")
	l.hostile(t, "tenant deletes the routing policy", func(ctx context.Context) error {
		return e.alice.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(ctx, "rota-gpu-pods-scheduler", metav1.DeleteOptions{})
	}, "forbidden")
	// Even a namespace that carries the old exemption label (set by someone
	// who may label namespaces) and its own copy of the parameter object
	// is checked.
	ns, err := e.cp.Client.CoreV1().Namespaces().Get(ctx, teamA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["rota.dev/reservation-admission"] = "exempt"
	if _, err := e.cp.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.alice.CoreV1().ConfigMaps(teamA).Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: paramsName},
		Data:       map[string]string{"exemptNamespaces": teamA, "schedulerName": "my-scheduler"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.hostile(t, "labelled namespace with its own parameter object, claim pod on another scheduler",
		createAsAlice(gpuPod(teamA, "labelled", "my-scheduler")), "set spec.schedulerName: rota-scheduler")

	// Priority: a pod Rota schedules may name only the classes the cluster
	// admin allowed.
	if _, err := e.cp.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "urgent"}, Value: 100000,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the Priority admission plugin to know PriorityClass urgent", func(ctx context.Context) (bool, string, error) {
		plain := gpuPod(teamA, "plain-urgent", v1.DefaultSchedulerName)
		plain.Spec.ResourceClaims, plain.Spec.Containers[0].Resources = nil, v1.ResourceRequirements{}
		plain.Spec.PriorityClassName = "urgent"
		_, err := e.alice.CoreV1().Pods(teamA).Create(ctx, plain, dryRun)
		return err == nil, fmt.Sprint(err), nil
	})
	urgent := gpuPod(teamA, "urgent", v1.DefaultSchedulerName)
	urgent.Spec.PriorityClassName = "urgent"
	l.hostile(t, "claim pod jumps the fair queue with a PriorityClass", createAsAlice(urgent),
		"spec.priorityClassName", "may not use PriorityClass urgent", "rota-system/rota-admission")
	critical := gpuPod(teamA, "critical", rotaScheduler)
	critical.Spec.ResourceClaims, critical.Spec.Containers[0].Resources = nil, v1.ResourceRequirements{}
	critical.Spec.PriorityClassName = "system-cluster-critical"
	l.hostile(t, "pod on Rota's scheduler with system-cluster-critical", createAsAlice(critical), "may not use PriorityClass system-cluster-critical")

	// What the cluster admin allows, with the same parameter object.
	params, err := e.cp.Client.CoreV1().ConfigMaps(paramsNS).Get(ctx, paramsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	params.Data["priorityClasses."+teamA] = "urgent"
	params.Data["exemptNamespaces"] = "ops"
	if _, err := e.cp.Client.CoreV1().ConfigMaps(paramsNS).Update(ctx, params, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.cp.EnsureNamespace(t, "ops")
	framework.WaitFor(t, "the admin's allowances to take effect", func(ctx context.Context) (bool, string, error) {
		if _, err := e.alice.CoreV1().Pods(teamA).Create(ctx, urgent, dryRun); err != nil {
			return false, err.Error(), nil
		}
		p, err := e.cp.Client.CoreV1().Pods("ops").Create(ctx, gpuPod("ops", "tool", "ops-scheduler"), dryRun)
		if err != nil {
			return false, err.Error(), nil
		}
		if p.Spec.SchedulerName != "ops-scheduler" {
			return false, "ops pod scheduler " + p.Spec.SchedulerName, nil
		}
		// Exempt pods are not routed either.
		p, err = e.cp.Client.CoreV1().Pods("ops").Create(ctx, gpuPod("ops", "default", ""), dryRun)
		if err != nil {
			return false, err.Error(), nil
		}
		return p.Spec.SchedulerName == v1.DefaultSchedulerName, "ops pod on the default scheduler routed to " + p.Spec.SchedulerName, nil
	})
	if _, err := e.bob.CoreV1().Pods(teamB).Create(ctx, func() *v1.Pod { p := gpuPod(teamB, "urgent", ""); p.Spec.PriorityClassName = "urgent"; return p }(), dryRun); err == nil {
		t.Errorf("team-b may use the PriorityClass the admin allowed for team-a only")
	}

	// End to end: the routed pod is placed by Rota's scheduler.
	t.Run("the routed pod is placed by rota-scheduler", func(t *testing.T) {
		e.cp.Create(t, framework.Node("gpu-node"), framework.GPUSlice("gpu-node", framework.GPUs(framework.GPU{Model: "H100", Architecture: "Hopper", MemoryGiB: 80}, 2)...))
		if _, err := e.alice.ResourceV1().ResourceClaimTemplates(teamA).Create(ctx, framework.TieredClaimTemplate(teamA, "gpu", framework.ModelTier("H100")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.cp.StartClaimController(t)
		e.cp.StartScheduler(t)
		if _, err := e.alice.CoreV1().Pods(teamA).Create(ctx, gpuPod(teamA, "trainer", ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := e.cp.WaitForPodBound(t, teamA, "trainer")
		if p.Spec.SchedulerName != rotaScheduler {
			t.Errorf("bound pod's scheduler %q, want %s", p.Spec.SchedulerName, rotaScheduler)
		}
	})
}
