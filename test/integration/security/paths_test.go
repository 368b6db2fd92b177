package security

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestOtherTenantPaths: ways around the scheduler that Kubernetes itself
// closes for a namespace admin, kept here so that a change of the shipped
// RBAC or of the cluster's defaults that opens one is noticed
// (docs/security.md lists them as trust assumptions).
func TestOtherTenantPaths(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	claim, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, framework.DeviceClaim(teamA, "mine", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := e.alice.CoreV1().Pods(teamA).Create(ctx, framework.ClaimPod(teamA, "waiting", "", "mine"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	l.hostile(t, "tenant allocates its own claim (writes its status)", func(ctx context.Context) error {
		c := claim.DeepCopy()
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: gpuv1.DriverName, Pool: "gpu-node", Device: "gpu-0",
		}}}}
		_, err := e.alice.ResourceV1().ResourceClaims(teamA).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	}, "forbidden")
	l.hostile(t, "tenant binds its own pod to a node", func(ctx context.Context) error {
		return e.alice.CoreV1().Pods(teamA).Bind(ctx, &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: pod.Name},
			Target:     v1.ObjectReference{Kind: "Node", Name: "gpu-node"},
		}, metav1.CreateOptions{})
	}, "forbidden")
	l.hostile(t, "tenant claims admin access to devices already in use", func(ctx context.Context) error {
		c := framework.DeviceClaim(teamA, "admin", 1)
		c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
		_, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, c, dryRun)
		return err
	}, "admin access")
	l.hostile(t, "tenant publishes GPUs of its own", func(ctx context.Context) error {
		_, err := e.alice.ResourceV1().ResourceSlices().Create(ctx, framework.GPUSlice("gpu-node", framework.GPUs(framework.GPU{Model: "H100"}, 1)...), dryRun)
		return err
	}, "forbidden")
	l.hostile(t, "tenant reads another tenant's claims", func(ctx context.Context) error {
		_, err := e.alice.ResourceV1().ResourceClaims(teamB).List(ctx, metav1.ListOptions{})
		return err
	}, "forbidden")
}
