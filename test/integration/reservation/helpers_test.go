package reservation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

const (
	node      = "hgx-h200-0"
	tenant    = "team-a"
	outsiders = "team-b"
)

// startReservationController runs pkg/reservation's controller as the
// schedule-controller binary does, until the test ends (before the control
// plane stops).
func startReservationController(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	framework.StartReservationController(t, cp.Client, cp.Dynamic)
}

// setup starts a control plane with one hgx-h200 node (8× H200), the
// namespaces, the claim controller, the reservation controller and Rota's
// scheduler.
func setup(t *testing.T) *framework.ControlPlane {
	t.Helper()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace(tenant), framework.Namespace(outsiders),
		framework.Node(node), framework.DeviceClass(), framework.H200Slice(node, 8))
	cp.StartClaimController(t)
	startReservationController(t, cp)
	cp.StartScheduler(t)
	return cp
}

// member is one entry of spec.members naming a Deployment.
func member(name, deployment string) rotav1.ReservationMember {
	return rotav1.ReservationMember{Name: name, WorkloadRef: rotav1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment}}
}

func createReservation(t *testing.T, cp *framework.ControlPlane, res *rotav1.GPUReservation) {
	t.Helper()
	u, err := rsv.ToUnstructured(res)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(res.Namespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create GPUReservation %s/%s: %v", res.Namespace, res.Name, err)
	}
}

func getReservation(ctx context.Context, cp *framework.ControlPlane, namespace, name string) (*rotav1.GPUReservation, error) {
	u, err := cp.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return rsv.FromObject(u)
}

// waitForReservation waits until check accepts the reservation's status.
func waitForReservation(t *testing.T, cp *framework.ControlPlane, namespace, name, what string, check func(*rotav1.GPUReservation) bool) *rotav1.GPUReservation {
	t.Helper()
	var res *rotav1.GPUReservation
	framework.WaitFor(t, fmt.Sprintf("GPUReservation %s/%s: %s", namespace, name, what), func(ctx context.Context) (bool, string, error) {
		r, err := getReservation(ctx, cp, namespace, name)
		if err != nil {
			return false, "", err
		}
		res = r
		return check(r), describeReservation(r), nil
	})
	return res
}

func describeReservation(r *rotav1.GPUReservation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s budget=%d devices=%v members=%+v", r.Status.Phase, r.Status.BudgetMiBPerGPU, r.Status.Devices, r.Status.Members)
	for _, c := range r.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func condition(r *rotav1.GPUReservation, typ string) metav1.Condition {
	for _, c := range r.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// allocatedDevices is the devices of the pod's claim "gpu", in order.
func allocatedDevices(t *testing.T, cp *framework.ControlPlane, pod *v1.Pod) []string {
	t.Helper()
	claim := cp.PodClaim(t, pod, "gpu")
	var out []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		out = append(out, r.Device)
	}
	return out
}

// reservedToleration is what members' claims carry.
func reservedToleration(namespace, name string) []resourceapi.DeviceToleration {
	return []resourceapi.DeviceToleration{rsv.Toleration(namespace, name)}
}

// podScheduledFalse reports whether the scheduler has tried the pod and
// left it unscheduled, with the message it gave.
func podScheduledFalse(ctx context.Context, cp *framework.ControlPlane, namespace, name string) (bool, string, error) {
	p, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	if p.Spec.NodeName != "" {
		return false, "bound to " + p.Spec.NodeName, fmt.Errorf("pod %s/%s was bound to %s", namespace, name, p.Spec.NodeName)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
			return true, c.Message, nil
		}
	}
	return false, "not tried yet", nil
}

var schedulerName = scheduler.ProfileName

func timeSliced(namespace, name string, count int32, members ...rotav1.ReservationMember) *rotav1.GPUReservation {
	return &rotav1.GPUReservation{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: rotav1.GPUReservationSpec{
			NodeName: node,
			Count:    ptr.To(count),
			Mode:     rotav1.ReservationTimeSliced,
			Headroom: "0.95",
			Members:  members,
		},
	}
}
