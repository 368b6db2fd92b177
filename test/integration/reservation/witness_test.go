package reservation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	reservationcontroller "github.com/rota-dev/rota/pkg/reservation/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestPlacementMismatch: a member whose template tolerates the reservation
// but does not pin its UUIDs may be allocated another GPU of the node. The
// witness compares the allocation in the claim's status with the held GPUs,
// reports PlacementMismatch with a fix, and leaves the pod where it is;
// deleting the reservation releases its GPUs (phase Releasing, rules gone).
func TestPlacementMismatch(t *testing.T) {
	cp := setup(t)
	ctx := context.Background()
	res := &rotav1.GPUReservation{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "pinned-last"},
		Spec: rotav1.GPUReservationSpec{
			NodeName:    node,
			DeviceUUIDs: []string{"GPU-hgx-h200-0-7"},
			Mode:        rotav1.ReservationExclusive,
			Members:     []rotav1.ReservationMember{member("m", "md-m")},
		},
	}
	createReservation(t, cp, res)
	waitForReservation(t, cp, tenant, res.Name, "Bound on gpu-7", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound && len(r.Status.Devices) == 1 && r.Status.Devices[0].Device == "gpu-7"
	})
	rs := cp.CreateDeployment(t, tenant, "md-m")
	cp.Create(t, framework.SharedGPUTemplate(tenant, "unpinned", 2048, reservedToleration(tenant, res.Name)))
	pod := framework.ReplicaPod(rs, "m-0", schedulerName, "unpinned")
	cp.Create(t, pod)
	cp.WaitForPodBound(t, tenant, pod.Name)
	got := allocatedDevices(t, cp, pod)
	if len(got) != 1 || got[0] == "gpu-7" {
		t.Fatalf("allocated %v; the test needs the allocator to pick a GPU other than gpu-7", got)
	}
	status := waitForReservation(t, cp, tenant, res.Name, "PlacementMismatch", func(r *rotav1.GPUReservation) bool {
		return condition(r, reservationcontroller.ConditionPlacementMismatch).Status == metav1.ConditionTrue
	})
	c := condition(status, reservationcontroller.ConditionPlacementMismatch)
	for _, want := range []string{"m-0 (member m) on " + got[0], "Fix:", "rota.dev/reserved=team-a.pinned-last", "uuid"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("PlacementMismatch message %q lacks %q", c.Message, want)
		}
	}
	if status.Status.Members[0].Placement != reservationcontroller.PlacementMismatch {
		t.Errorf("member placement = %q, want %s", status.Status.Members[0].Placement, reservationcontroller.PlacementMismatch)
	}
	framework.WaitFor(t, "a PlacementMismatch event on the pod", func(context.Context) (bool, string, error) {
		notes := cp.PodEventNotes(t, pod, reservationcontroller.PlacementMismatch)
		return len(notes) > 0, strings.Join(notes, "; "), nil
	})
	// Never corrected: the pod stays where it was placed.
	if p, err := cp.Client.CoreV1().Pods(tenant).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("pod after mismatch: %v, deleting=%v", err, p.DeletionTimestamp != nil)
	}
	t.Logf("witness: %s", c.Message)

	// Deleting the reservation releases the GPU.
	if err := cp.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(tenant).Delete(ctx, res.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the reservation and its DeviceTaintRule to be gone", func(ctx context.Context) (bool, string, error) {
		rules, err := cp.Client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: gpuv1.ReservationNameLabel + "=" + res.Name})
		if err != nil {
			return false, "", err
		}
		_, err = getReservation(ctx, cp, tenant, res.Name)
		return len(rules.Items) == 0 && err != nil, fmt.Sprintf("rules=%d reservation err=%v", len(rules.Items), err), nil
	})
}
