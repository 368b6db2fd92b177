package reservation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
)

// hostileSetup is setup with the apiserver authorizing by RBAC, the shipped
// admission policies installed, a time-sliced reservation team-a/serving
// holding count GPUs for the Deployment md-a and the StatefulSet db (both
// made by the platform, as their controllers would), and team-a's admin
// alice, who has no cluster rights.
func hostileSetup(t *testing.T, count int32) (*framework.ControlPlane, *framework.Tenant, *rotav1.GPUReservation, *appsv1.ReplicaSet, *appsv1.StatefulSet) {
	t.Helper()
	cp := framework.StartControlPlaneWithRBAC(t)
	cp.Create(t, framework.Namespace(tenant), framework.Namespace(outsiders),
		framework.Node(node), framework.DeviceClass(), framework.H200Slice(node, 8))
	installAdmissionPolicy(t, cp)
	cp.StartClaimController(t)
	startReservationController(t, cp)
	cp.StartScheduler(t)
	alice := cp.TenantAdmin(t, tenant, "alice")

	createReservation(t, cp, timeSliced(tenant, "serving", count, member("a", "md-a"),
		rotav1.ReservationMember{Name: "db", WorkloadRef: rotav1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}}))
	res := waitForReservation(t, cp, tenant, "serving", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound && len(r.Status.Devices) == int(count)
	})
	rs := cp.CreateDeployment(t, tenant, "md-a")
	labels := map[string]string{"app": "db"}
	sts, err := cp.Client.AppsV1().StatefulSets(tenant).Create(context.Background(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cp, alice, res, rs, sts
}

// heldSelector is the CEL expression that allows every GPU res holds.
func heldSelector(res *rotav1.GPUReservation) string {
	var uuids []string
	for _, d := range res.Status.Devices {
		uuids = append(uuids, fmt.Sprintf("%q", d.UUID))
	}
	return fmt.Sprintf("device.attributes[%q].uuid in [%s]", gpuv1.DriverName, strings.Join(uuids, ", "))
}

// tenantCreate creates obj as the tenant, failing the test when the API
// server refuses it: these attempts are refused by the scheduler, not at
// the door.
func tenantCreate(t *testing.T, ten *framework.Tenant, obj any) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *v1.Pod:
		_, err = ten.Client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.ReplicaSet:
		_, err = ten.Client.AppsV1().ReplicaSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *resourceapi.ResourceClaimTemplate:
		_, err = ten.Client.ResourceV1().ResourceClaimTemplates(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		t.Fatalf("tenantCreate: unexpected %T", obj)
	}
	if err != nil {
		t.Fatalf("%s creating %T: %v", ten.User, obj, err)
	}
}

func controlledBy(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

// TestForgedMembershipIsRefused (#16 point 2): team-a's admin forges, with
// its own rights only, controller references that would make a pod a
// member of team-a/serving. Each pod tolerates the reservation and pins the
// held GPU; each waits with Reserved, naming ReservationNotMember and why
// its chain does not verify. A pod the ReplicaSet controller would make is
// admitted.
func TestForgedMembershipIsRefused(t *testing.T) {
	cp, alice, res, rs, sts := hostileSetup(t, 1)
	tenantCreate(t, alice, framework.SharedGPUTemplate(tenant, "tmpl", 4096, reservedToleration(tenant, "serving"), heldSelector(res)))
	forged := func(name string, labels map[string]string, refs []metav1.OwnerReference) *v1.Pod {
		p := framework.GPUPod(tenant, name, schedulerName, "tmpl")
		p.Labels, p.OwnerReferences = labels, refs
		return p
	}
	// The tenant's own ReplicaSet, claiming the member Deployment.
	ownRS := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "md-a-forged", Labels: map[string]string{"app": "md-a"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-a", UID: "0badc0de-0000-0000-0000-000000000000", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "md-a"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "md-a"}}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}},
	}
	tenantCreate(t, alice, ownRS)
	ownRS, err := cp.Client.AppsV1().ReplicaSets(tenant).Get(context.Background(), ownRS.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string]struct {
		pod  *v1.Pod
		want string
	}{
		"StatefulSet reference with a made-up UID": {
			pod:  forged("sts-uid", map[string]string{"app": "db"}, controlledBy("StatefulSet", "db", "0badc0de-1111-1111-1111-111111111111")),
			want: "the StatefulSet of that name has another UID",
		},
		"reference to a member StatefulSet with the real UID but not selected by it": {
			pod:  forged("sts-selector", map[string]string{"app": "other"}, controlledBy("StatefulSet", "db", sts.UID)),
			want: "its selector does not select sts-selector",
		},
		"member ReplicaSet with a made-up UID": {
			pod:  forged("rs-uid", rs.Spec.Selector.MatchLabels, controlledBy("ReplicaSet", rs.Name, "0badc0de-2222-2222-2222-222222222222")),
			want: "the ReplicaSet of that name has another UID",
		},
		"ReplicaSet that does not exist": {
			pod:  forged("rs-missing", rs.Spec.Selector.MatchLabels, controlledBy("ReplicaSet", "md-a-ghost", "0badc0de-3333-3333-3333-333333333333")),
			want: "it does not exist",
		},
		"tenant's own ReplicaSet claiming the member Deployment": {
			pod:  forged("rs-own", map[string]string{"app": "md-a"}, controlledBy("ReplicaSet", ownRS.Name, ownRS.UID)),
			want: "md-a-forged names controller Deployment md-a (uid 0badc0de-0000-0000-0000-000000000000), but the Deployment of that name has another UID",
		},
		"member ReplicaSet in another API group": {
			pod:  forged("rs-group", rs.Spec.Selector.MatchLabels, []metav1.OwnerReference{{APIVersion: "evil.example.com/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}),
			want: "Rota resolves only",
		},
		"member labels without a controller": {
			pod:  forged("labels", map[string]string{"app": "md-a", "rota.dev/member": "a"}, nil),
			want: "(no controller)",
		},
	}
	for name, a := range attempts {
		t.Run(name, func(t *testing.T) {
			tenantCreate(t, alice, a.pod)
			msg := cp.WaitForWaiting(t, tenant, a.pod.Name, string(waits.Reserved), "ReservationNotMember", "not a member of GPUReservation team-a/serving", a.want)
			t.Logf("refused: %s", msg)
		})
	}
	t.Run("StatefulSet reference without a UID is refused by the API server", func(t *testing.T) {
		p := forged("sts-no-uid", map[string]string{"app": "db"}, controlledBy("StatefulSet", "db", ""))
		_, err := alice.Client.CoreV1().Pods(tenant).Create(context.Background(), p, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "metadata.ownerReferences[0].uid: Required value") {
			t.Fatalf("create: %v, want the uid required", err)
		}
	})
	t.Run("legitimate member pod is admitted", func(t *testing.T) {
		p := framework.ReplicaPod(rs, "md-a-0", schedulerName, "tmpl")
		cp.Create(t, p)
		cp.WaitForPodBound(t, tenant, p.Name)
		if got := allocatedDevices(t, cp, p); len(got) != 1 || got[0] != res.Status.Devices[0].Device {
			t.Errorf("member allocated %v, want the held %s", got, res.Status.Devices[0].Device)
		}
	})
	for name, a := range attempts {
		p, err := cp.Client.CoreV1().Pods(tenant).Get(context.Background(), a.pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("%s: pod %s bound to %s", name, p.Name, p.Spec.NodeName)
		}
	}
}

// TestBudgetIsPerDevicePerGPU (#16 point 3): a reservation holding 2 H200s
// (budget 136582 MiB each). The tenant tries what the pooled, per-claim
// budget let through; each attempt waits with ReservationOvercommitted and
// both numbers, while members that fit each GPU bind.
func TestBudgetIsPerDevicePerGPU(t *testing.T) {
	cp, alice, res, rs, _ := hostileSetup(t, 2)
	u0, u1 := res.Status.Devices[0].UUID, res.Status.Devices[1].UUID
	tol := reservedToleration(tenant, "serving")
	tmpl := func(name string, memoryMiB, count int64, cel string) {
		tm := framework.SharedGPUTemplate(tenant, name, memoryMiB, tol, cel)
		tm.Spec.Spec.Devices.Requests[0].Exactly.Count = count
		tenantCreate(t, alice, tm)
	}
	tmpl("on-gpu0", 100000, 1, framework.UUIDSelector(u0))
	tmpl("on-gpu1", 100000, 1, framework.UUIDSelector(u1))
	tmpl("either-40g", 40000, 1, heldSelector(res))
	tmpl("pair-20g", 20000, 2, heldSelector(res))
	start := func(name, template string) *v1.Pod {
		p := framework.ReplicaPod(rs, name, schedulerName, template)
		cp.Create(t, p) // as the ReplicaSet controller would
		return p
	}
	cp.WaitForPodBound(t, tenant, start("a-gpu0", "on-gpu0").Name)

	t.Run("the allocator's choice is checked against that GPU's budget before binding", func(t *testing.T) {
		// gpu-1 has room, so some choice fits; the allocator takes gpu-0
		// (43771 MiB free there), where the budget has 36582 MiB left.
		p := start("c-either", "either-40g")
		msg := cp.WaitForWaiting(t, tenant, p.Name, string(waits.ReservationOvercommitted), "the allocator chose gpu-0", "100000 MiB", "asks 40000 MiB: 140000 > 136582")
		t.Logf("refused: %s", msg)
		cp.DeletePodNow(t, tenant, p.Name)
	})
	cp.WaitForPodBound(t, tenant, start("b-gpu1", "on-gpu1").Name)

	t.Run("the budget is per GPU, not pooled over the reservation", func(t *testing.T) {
		// Pooled: 200000 + 40000 ≤ 2 × 136582; per GPU: 140000 > 136582.
		p := start("d-either", "either-40g")
		msg := cp.WaitForWaiting(t, tenant, p.Name, string(waits.ReservationOvercommitted), "136582 MiB per GPU (2 GPU(s) held)", "claims hold 100000 MiB", "asks 40000 MiB: 140000 > 136582")
		t.Logf("refused: %s", msg)
		cp.DeletePodNow(t, tenant, p.Name)
	})
	t.Run("a 2-device member costs each GPU it gets", func(t *testing.T) {
		// One device on each GPU: 120000 each, within the budget.
		first := start("e-pair", "pair-20g")
		cp.WaitForPodBound(t, tenant, first.Name)
		if got := allocatedDevices(t, cp, first); len(got) != 2 || got[0] == got[1] {
			t.Errorf("pair allocated %v, want both held GPUs", got)
		}
		// A second pair would make 140000 on each GPU; counted once (the
		// last memoryMiB of the claim, pooled) it used to fit.
		second := start("f-pair", "pair-20g")
		msg := cp.WaitForWaiting(t, tenant, second.Name, string(waits.ReservationOvercommitted), "asks 2 × 20000 MiB", "which no choice of held GPUs fits")
		t.Logf("refused: %s", msg)
	})
	t.Run("a member whose vLLM would take more than its memoryMiB", func(t *testing.T) {
		// 40000 MiB of an H200 is 0.2782 of it; vLLM is told 0.9.
		p := framework.ReplicaPod(rs, "g-vllm", schedulerName, "either-40g")
		p.Spec.Containers[0].Image = "vllm/vllm-openai:v0.11.0"
		p.Spec.Containers[0].Args = []string{"--model", "m", "--gpu-memory-utilization", "0.9"}
		cp.Create(t, p)
		msg := cp.WaitForWaiting(t, tenant, p.Name, string(waits.ReservationOvercommitted),
			"ReservationArgsConflict", "--gpu-memory-utilization 0.9", "may use 40000 MiB of it (memoryMiB), 0.2782 of the GPU")
		t.Logf("refused: %s", msg)
	})
}
