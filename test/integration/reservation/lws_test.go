package reservation

import (
	"context"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
)

// lwsObjects are what the LeaderWorkerSet controller (which cannot run here)
// makes for group 0 of LeaderWorkerSet llm: the leader StatefulSet it
// controls, the leader pod, the workers' StatefulSet the leader pod
// controls, and one worker pod.
func lwsObjects(t *testing.T, cp *framework.ControlPlane, lwsUID metav1.Object, template string) (leader, worker *v1.Pod) {
	t.Helper()
	ctx := context.Background()
	name := map[string]string{rotav1.LeaderWorkerSetNameLabel: "llm"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{rotav1.LeaderWorkerSetNameLabel: "llm"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	sts := func(stsName string, owner metav1.OwnerReference, podLabels map[string]string) *appsv1.StatefulSet {
		s, err := cp.Client.AppsV1().StatefulSets(tenant).Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: stsName, Labels: name, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: podLabels},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pod := func(podName string, labels map[string]string, owner *appsv1.StatefulSet) *v1.Pod {
		p := framework.GPUPod(tenant, podName, schedulerName, template)
		p.Labels = labels
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		created, err := cp.Client.CoreV1().Pods(tenant).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	leaderLabels := with(map[string]string{"role": "leader"})
	leaderSTS := sts("llm", metav1.OwnerReference{APIVersion: rotav1.LeaderWorkerSetGroupVersion, Kind: rotav1.LeaderWorkerSetKind, Name: "llm", UID: lwsUID.GetUID(), Controller: ptr.To(true)}, leaderLabels)
	leader = pod("llm-0", leaderLabels, leaderSTS)
	workerLabels := with(map[string]string{"role": "worker", "group": "0"})
	workerSTS := sts("llm-0", metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: leader.Name, UID: leader.UID, Controller: ptr.To(true)}, workerLabels)
	worker = pod("llm-0-1", workerLabels, workerSTS)
	return leader, worker
}

// TestLeaderWorkerSetMembers: a LeaderWorkerSet listed as a member has its
// leader and worker pods admitted on the held GPU, through both chains
// (pod → StatefulSet → LeaderWorkerSet, and pod → StatefulSet → leader pod
// → StatefulSet → LeaderWorkerSet). team-a's admin, with namespace rights
// only, cannot forge either chain.
func TestLeaderWorkerSetMembers(t *testing.T) {
	cp := framework.StartControlPlaneWithRBAC(t)
	// The stand-in CRD the schedule tests use for the LeaderWorkerSet API.
	cp.InstallCRDsFrom(t, filepath.Join(framework.RepoRoot(t), "test", "integration", "schedule", "testdata", "lws"))
	framework.WaitFor(t, "the LeaderWorkerSet API in discovery", func(context.Context) (bool, string, error) {
		_, err := cp.Client.Discovery().ServerResourcesForGroupVersion(rotav1.LeaderWorkerSetGroupVersion)
		return err == nil, "not served yet", nil
	})
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
	lws, err := cp.Dynamic.Resource(rotav1.LeaderWorkerSetsResource).Namespace(tenant).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rotav1.LeaderWorkerSetGroupVersion, "kind": rotav1.LeaderWorkerSetKind,
		"metadata": map[string]any{"namespace": tenant, "name": "llm"},
		"spec":     map[string]any{"replicas": int64(1), "leaderWorkerTemplate": map[string]any{"size": int64(2)}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tenantCreate(t, alice, framework.SharedGPUTemplate(tenant, "tmpl", 20480, reservedToleration(tenant, "serving"), heldSelector(res)))

	t.Run("leader and worker pods are members", func(t *testing.T) {
		leader, worker := lwsObjects(t, cp, lws, "tmpl")
		for _, p := range []*v1.Pod{leader, worker} {
			cp.WaitForPodBound(t, tenant, p.Name)
			if got := allocatedDevices(t, cp, p); len(got) != 1 || got[0] != res.Status.Devices[0].Device {
				t.Errorf("%s allocated %v, want the held %s", p.Name, got, res.Status.Devices[0].Device)
			}
		}
		waitForReservation(t, cp, tenant, "serving", "member llm counted with 2 pods", func(r *rotav1.GPUReservation) bool {
			return len(r.Status.Members) == 1 && r.Status.Members[0].Pods == 2
		})
	})

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
