package reservation

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
	"github.com/rota-dev/rota/test/integration/framework/leaderworkerset"
)

// Labels the LeaderWorkerSet controller and its pod webhook put on a
// group's pods (sigs.k8s.io/lws/api/leaderworkerset/v1).
const (
	lwsGroupIndexLabel  = "leaderworkerset.sigs.k8s.io/group-index"
	lwsWorkerIndexLabel = "leaderworkerset.sigs.k8s.io/worker-index"
)

// lwsTemplate is a LeaderWorkerSet pod template whose pods take a GPU
// through claimTemplate, scheduled by Rota's scheduler.
func lwsTemplate(t *testing.T, role, claimTemplate string) map[string]any {
	t.Helper()
	p := framework.GPUPod(tenant, "", schedulerName, claimTemplate)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"role": role}}, Spec: p.Spec,
	})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestLeaderWorkerSetMembers: a LeaderWorkerSet listed as a member, run by
// the real LeaderWorkerSet controller (sigs.k8s.io/lws, with its CRD and
// webhooks, the StatefulSet controller and the garbage collector), has
// both pods of its group admitted on the held GPU: the leader through pod
// → StatefulSet → LeaderWorkerSet, the worker through pod → StatefulSet →
// leader pod → StatefulSet → LeaderWorkerSet, the chains the controller
// builds.
func TestLeaderWorkerSetMembers(t *testing.T) {
	cp := framework.StartControlPlaneWithRBAC(t)
	leaderworkerset.Start(t, cp)
	cp.Create(t, framework.Namespace(tenant), framework.Node(node), framework.DeviceClass(), framework.H200Slice(node, 8))
	cp.InstallAdmissionPolicies(t)
	cp.StartClaimController(t)
	startReservationController(t, cp)
	cp.StartScheduler(t)
	alice := cp.TenantAdmin(t, tenant, "alice")
	ctx := context.Background()

	createReservation(t, cp, timeSliced(tenant, "serving", 1,
		rotav1.ReservationMember{Name: "llm", WorkloadRef: rotav1.WorkloadReference{APIVersion: rotav1.LeaderWorkerSetGroupVersion, Kind: rotav1.LeaderWorkerSetKind, Name: "llm"}}))
	res := waitForReservation(t, cp, tenant, "serving", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound
	})
	tenantCreate(t, alice, framework.SharedGPUTemplate(tenant, "tmpl", 20480, reservedToleration(tenant, "serving"), heldSelector(res)))
	if _, err := cp.Dynamic.Resource(rotav1.LeaderWorkerSetsResource).Namespace(tenant).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rotav1.LeaderWorkerSetGroupVersion, "kind": rotav1.LeaderWorkerSetKind,
		"metadata": map[string]any{"namespace": tenant, "name": "llm"},
		"spec": map[string]any{"replicas": int64(1), "leaderWorkerTemplate": map[string]any{
			"size":           int64(2),
			"leaderTemplate": lwsTemplate(t, "leader", "tmpl"),
			"workerTemplate": lwsTemplate(t, "worker", "tmpl"),
		}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The controller names a group's pods <set>-<group> (leader) and
	// <set>-<group>-<worker>.
	for name, labels := range map[string]map[string]string{
		"llm-0":   {rotav1.LeaderWorkerSetNameLabel: "llm", lwsGroupIndexLabel: "0", lwsWorkerIndexLabel: "0", "role": "leader"},
		"llm-0-1": {rotav1.LeaderWorkerSetNameLabel: "llm", lwsGroupIndexLabel: "0", lwsWorkerIndexLabel: "1", "role": "worker"},
	} {
		p := cp.WaitForPodBound(t, tenant, name)
		for k, v := range labels {
			if p.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q (labels %v)", name, k, p.Labels[k], v, p.Labels)
			}
		}
		if got := allocatedDevices(t, cp, p); len(got) != 1 || got[0] != res.Status.Devices[0].Device {
			t.Errorf("%s allocated %v, want the held %s", name, got, res.Status.Devices[0].Device)
		}
	}
	waitForReservation(t, cp, tenant, "serving", "member llm counted with 2 pods", func(r *rotav1.GPUReservation) bool {
		return len(r.Status.Members) == 1 && r.Status.Members[0].Pods == 2
	})
}

// TestLeaderWorkerSetForgedChains: team-a's admin, with namespace rights
// only, cannot make a pod a member of LeaderWorkerSet llm by forging either
// chain. The LeaderWorkerSet is real (its CRD from sigs.k8s.io/lws); no
// StatefulSet controller or garbage collector runs, since they would
// orphan or delete the forged objects (a StatefulSet whose owner UID does
// not exist is collected) before the scheduler is asked: the refusal is
// shown on the objects exactly as the tenant wrote them.
func TestLeaderWorkerSetForgedChains(t *testing.T) {
	cp := framework.StartControlPlaneWithRBAC(t)
	leaderworkerset.InstallCRD(t, cp)
	cp.Create(t, framework.Namespace(tenant), framework.Node(node), framework.DeviceClass(), framework.H200Slice(node, 8))
	cp.InstallAdmissionPolicies(t)
	cp.StartClaimController(t)
	startReservationController(t, cp)
	cp.StartScheduler(t)
	alice := cp.TenantAdmin(t, tenant, "alice")
	ctx := context.Background()

	createReservation(t, cp, timeSliced(tenant, "serving", 1,
		rotav1.ReservationMember{Name: "llm", WorkloadRef: rotav1.WorkloadReference{APIVersion: rotav1.LeaderWorkerSetGroupVersion, Kind: rotav1.LeaderWorkerSetKind, Name: "llm"}}))
	res := waitForReservation(t, cp, tenant, "serving", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound
	})
	if _, err := cp.Dynamic.Resource(rotav1.LeaderWorkerSetsResource).Namespace(tenant).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rotav1.LeaderWorkerSetGroupVersion, "kind": rotav1.LeaderWorkerSetKind,
		"metadata": map[string]any{"namespace": tenant, "name": "llm"},
		"spec": map[string]any{"replicas": int64(0), "leaderWorkerTemplate": map[string]any{
			"size": int64(2), "workerTemplate": lwsTemplate(t, "worker", "tmpl"),
		}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantCreate(t, alice, framework.SharedGPUTemplate(tenant, "tmpl", 20480, reservedToleration(tenant, "serving"), heldSelector(res)))

	// The tenant's own StatefulSet, claiming the LeaderWorkerSet.
	forgedLeaders := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "fake-llm", Labels: map[string]string{rotav1.LeaderWorkerSetNameLabel: "llm"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: rotav1.LeaderWorkerSetGroupVersion, Kind: rotav1.LeaderWorkerSetKind, Name: "llm", UID: "0badc0de-4444-4444-4444-444444444444", Controller: ptr.To(true)}}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fake"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "fake"}}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}},
	}
	t.Run("tenant's StatefulSet claiming the LeaderWorkerSet", func(t *testing.T) {
		if _, err := alice.Client.AppsV1().StatefulSets(tenant).Create(ctx, forgedLeaders, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sts, err := cp.Client.AppsV1().StatefulSets(tenant).Get(ctx, forgedLeaders.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := framework.GPUPod(tenant, "fake-llm-0", schedulerName, "tmpl")
		p.Labels = map[string]string{"app": "fake"}
		p.OwnerReferences = controlledBy("StatefulSet", sts.Name, sts.UID)
		tenantCreate(t, alice, p)
		msg := cp.WaitForWaiting(t, tenant, p.Name, string(waits.Reserved), "ReservationNotMember", "the LeaderWorkerSet of that name has another UID")
		t.Logf("refused: %s", msg)
	})
	t.Run("workers of a StatefulSet led by the tenant's own pod", func(t *testing.T) {
		fakeLeader := framework.GPUPod(tenant, "fake-leader", schedulerName, "tmpl")
		// It only needs to exist: no claims (a GPU pod must be Rota's to
		// be admitted) and a scheduler that never places it.
		fakeLeader.Spec.SchedulerName = "nobody"
		fakeLeader.Spec.ResourceClaims = nil
		for i := range fakeLeader.Spec.Containers {
			fakeLeader.Spec.Containers[i].Resources.Claims = nil
		}
		tenantCreate(t, alice, fakeLeader)
		fl, err := cp.Client.CoreV1().Pods(tenant).Get(ctx, fakeLeader.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		workers := forgedLeaders.DeepCopy()
		workers.Name = "fake-workers"
		workers.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: fl.Name, UID: fl.UID, Controller: ptr.To(true)}}
		if _, err := alice.Client.AppsV1().StatefulSets(tenant).Create(ctx, workers, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sts, err := cp.Client.AppsV1().StatefulSets(tenant).Get(ctx, workers.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := framework.GPUPod(tenant, "fake-workers-1", schedulerName, "tmpl")
		p.Labels = map[string]string{"app": "fake"}
		p.OwnerReferences = controlledBy("StatefulSet", sts.Name, sts.UID)
		tenantCreate(t, alice, p)
		msg := cp.WaitForWaiting(t, tenant, p.Name, string(waits.Reserved), "ReservationNotMember", "is controlled by pod fake-leader, which is not a LeaderWorkerSet group's leader")
		t.Logf("refused: %s", msg)
	})
}
