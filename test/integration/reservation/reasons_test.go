package reservation

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestWaitReasonsNameTheCause checks, on a node whose driver publishes
// plain GPUs and on one that publishes them with consumable memory
// (--consumable-memory), that a pod kept off a GPU waits with the reason
// of the real cause: a GPUReservation holding the GPU (the pod is not a
// member), the reservation's VRAM budget (a member asks too much), or a GPU
// the driver marked unhealthy (also one the reservation holds: its member
// waits for the GPU). Each node has two H200s: gpu-0 is held by
// GPUReservation team-a/serving, gpu-1 is taken by another tenant's pod
// until the unhealthy case frees and taints it.
func TestWaitReasonsNameTheCause(t *testing.T) {
	kinds := map[string]func(string, int) *resourceapi.ResourceSlice{
		"plain": func(n string, c int) *resourceapi.ResourceSlice {
			return framework.GPUSlice(n, framework.GPUs(framework.H200, c)...)
		},
		"consumable-memory": framework.H200Slice,
	}
	for kind, slice := range kinds {
		t.Run(kind, func(t *testing.T) { testWaitReasons(t, slice(node, 2)) })
	}
}

func testWaitReasons(t *testing.T, slice *resourceapi.ResourceSlice) {
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace(tenant), framework.Namespace(outsiders),
		framework.Node(node), framework.DeviceClass(), slice)
	cp.StartClaimController(t)
	startReservationController(t, cp)
	cp.StartScheduler(t)

	createReservation(t, cp, timeSliced(tenant, "serving", 1, member("a", "md-a")))
	res := waitForReservation(t, cp, tenant, "serving", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound
	})
	if len(res.Status.Devices) != 1 || res.Status.Devices[0].Device != "gpu-0" {
		t.Fatalf("held devices = %+v, want gpu-0", res.Status.Devices)
	}
	heldUUID, otherUUID := res.Status.Devices[0].UUID, "GPU-"+node+"-1"
	// Another tenant's pod takes the only GPU no reservation holds.
	cp.Create(t, framework.SharedGPUTemplate(outsiders, "filler", 0, nil, framework.UUIDSelector(otherUUID)))
	filler := framework.GPUPod(outsiders, "filler", schedulerName, "filler")
	cp.Create(t, filler)
	cp.WaitForPodBound(t, outsiders, filler.Name)

	t.Run("non-member kept off the reserved GPU", func(t *testing.T) {
		cp.Create(t, framework.SharedGPUTemplate(outsiders, "any", 0, nil))
		p := framework.GPUPod(outsiders, "outsider", schedulerName, "any")
		cp.Create(t, p)
		msg := cp.WaitForWaiting(t, outsiders, p.Name, string(waits.Reserved), "0/2 free (1 reserved by GPUReservations of other namespaces)")
		t.Logf("outsider waits: %s", msg)
		cp.WaitForPodUnschedulable(t, outsiders, p.Name,
			"0 free and 1 more matching but reserved by GPUReservations of other namespaces ("+node+": 1)", "not a member")

		// A tiered claim: Tiering's explanation says the GPU is reserved,
		// not by whom either.
		cp.Create(t, framework.TieredClaimTemplate(outsiders, "tiered", framework.ModelTier("H200")))
		tp := framework.GPUPod(outsiders, "tiered", schedulerName, "tiered")
		cp.Create(t, tp)
		cp.WaitForWaiting(t, outsiders, tp.Name, string(waits.Reserved), "reserved by GPUReservations of other namespaces")
		msg = cp.WaitForPodUnschedulable(t, outsiders, tp.Name, "tier 1/1 h200: 0 of 1 nodes — 1 reserved by a GPUReservation of another namespace")
		t.Logf("tiered outsider: %s", msg)
		// Nothing the outsider can read of its pods names the other
		// tenant's reservation: conditions, annotations, events.
		for _, name := range []string{p.Name, tp.Name} {
			pod, err := cp.Client.CoreV1().Pods(outsiders).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var said []string
			for _, c := range pod.Status.Conditions {
				said = append(said, c.Message)
			}
			for _, v := range pod.Annotations {
				said = append(said, v)
			}
			events, err := cp.Client.CoreV1().Events(outsiders).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				said = append(said, e.Message)
			}
			for _, s := range said {
				if strings.Contains(s, "serving") || strings.Contains(s, tenant+"/") || strings.Contains(s, tenant+".") {
					t.Errorf("outsider pod %s is told about %s's reservation: %q", name, tenant, s)
				}
			}
		}

		// In the reservation's namespace, tolerating it, but not a member.
		cp.Create(t, framework.SharedGPUTemplate(tenant, "forged", 0, reservedToleration(tenant, "serving")))
		fp := framework.GPUPod(tenant, "forged", schedulerName, "forged")
		cp.Create(t, fp)
		msg = cp.WaitForWaiting(t, tenant, fp.Name, string(waits.Reserved), "not a member of GPUReservation team-a/serving")
		t.Logf("tolerating non-member waits: %s", msg)
	})

	memberRS := cp.CreateDeployment(t, tenant, "md-a")
	t.Run("member over the reservation's budget", func(t *testing.T) {
		cp.Create(t, framework.SharedGPUTemplate(tenant, "big", 140000, reservedToleration(tenant, "serving"), framework.UUIDSelector(heldUUID)))
		p := framework.ReplicaPod(memberRS, "big", schedulerName, "big")
		cp.Create(t, p)
		msg := cp.WaitForWaiting(t, tenant, p.Name, string(waits.ReservationOvercommitted),
			"pod asks 140000 MiB but GPUReservation team-a/serving allows")
		t.Logf("member over budget waits: %s", msg)
	})

	t.Run("unhealthy GPU", func(t *testing.T) {
		cp.SetDeviceTaints(t, node, "gpu-1", framework.UnhealthyTaint)
		cp.DeletePodNow(t, outsiders, filler.Name)
		cp.Create(t, framework.SharedGPUTemplate(outsiders, "pinned", 0, nil, framework.UUIDSelector(otherUUID)))
		p := framework.GPUPod(outsiders, "pinned", schedulerName, "pinned")
		cp.Create(t, p)
		// The condition is short; the other H200 fails the pod's UUID selector.
		msg := cp.WaitForWaiting(t, outsiders, p.Name, string(waits.Unhealthy), "0/1 free (1 tainted unhealthy, 1 fail a constraint)")
		t.Logf("pod pinned to the unhealthy GPU waits: %s", msg)
		cp.WaitForPodUnschedulable(t, outsiders, p.Name, "0 free and 1 more matching but tainted unhealthy ("+node+": 1)")

		// The reserved GPU turns unhealthy: a member that would use it
		// waits for the GPU, not for the reservation.
		cp.SetDeviceTaints(t, node, "gpu-0", framework.UnhealthyTaint)
		waitForReservation(t, cp, tenant, "serving", "Degraded", func(r *rotav1.GPUReservation) bool {
			return r.Status.Phase == rotav1.ReservationDegraded
		})
		cp.Create(t, framework.SharedGPUTemplate(tenant, "small", 1024, reservedToleration(tenant, "serving"), framework.UUIDSelector(heldUUID)))
		mp := framework.ReplicaPod(memberRS, "small", schedulerName, "small")
		cp.Create(t, mp)
		msg = cp.WaitForWaiting(t, tenant, mp.Name, string(waits.Unhealthy), "0/1 free (1 tainted unhealthy, 1 fail a constraint)")
		t.Logf("member of the reservation whose GPU turned unhealthy waits: %s", msg)
		cp.WaitForPodUnschedulable(t, tenant, mp.Name, "0 free and 1 more matching but tainted unhealthy ("+node+": 1)")
	})
}
