package admission

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestQuotaCountsExtendedResources (#38 point 3): team-a may hold one
// H100 and holds it through a claim. Its admin asks for another GPU as a
// DRA extended resource (deviceclass.resource.kubernetes.io/gpu.rota.dev),
// which DynamicResources allocates without a claim the pod names. The
// only free device is an H100: the pod waits with QuotaExceeded and the
// claim the scheduler wrote for it is gone; its rota.dev/Waiting
// condition says QuotaExceeded. Once the first pod is deleted
// the same pod binds, charged like a claim.
func TestQuotaCountsExtendedResources(t *testing.T) {
	cp := framework.StartControlPlaneWithRBAC(t)
	cp.Create(t, framework.Namespace("team-a"), framework.DeviceClass(),
		framework.Node("mix"), framework.GPUSlice("mix", framework.H100, framework.H100))
	cp.InstallAdmissionPolicies(t)
	cp.StartClaimController(t)
	cp.StartSchedulerWithPluginArgs(t, map[string]any{
		"Quota": map[string]any{"tenants": []any{map[string]any{"namespace": "team-a", "limits": map[string]any{"H100": 1}}}},
	})
	alice := cp.TenantAdmin(t, "team-a", "alice")
	ctx := context.Background()
	if _, err := alice.Client.ResourceV1().ResourceClaimTemplates("team-a").Create(ctx, framework.TieredClaimTemplate("team-a", "h100", framework.ModelTier("H100")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Client.CoreV1().Pods("team-a").Create(ctx, framework.GPUPod("team-a", "holder", sched, "h100"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitForPodBound(t, "team-a", "holder")

	extended := framework.GPUPod("team-a", "extended", sched, "unused")
	extended.Spec.ResourceClaims = nil
	extended.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: v1.ResourceList{
		v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + gpuv1.DeviceClassName): resource.MustParse("1"),
	}}
	if _, err := alice.Client.CoreV1().Pods("team-a").Create(ctx, extended, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := cp.WaitForPodUnschedulable(t, "team-a", "extended", string(waits.QuotaExceeded),
		"the allocator granted 1 H100 for the pod's extended resources", "team-a holds 1 of 1 H100 and this pod would take 1 more: 2 > 1")
	t.Logf("refused: %s", msg)
	// The refusal came in the binding cycle, where PostFilter does not run:
	// the rota.dev/Waiting condition says it all the same.
	cp.WaitForWaiting(t, "team-a", "extended", string(waits.QuotaExceeded), "the allocator granted 1 H100 for the pod's extended resources")
	framework.WaitFor(t, "the refused pod's claim to be deleted", func(ctx context.Context) (bool, string, error) {
		held := cp.AllocatedDevices(t)
		return len(held) == 1, fmt.Sprint(held), nil
	})

	if err := cp.Client.CoreV1().Pods("team-a").Delete(ctx, "holder", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	p := cp.WaitForPodBound(t, "team-a", "extended")
	if p.Status.ExtendedResourceClaimStatus == nil {
		t.Errorf("bound without an extended-resource claim: %+v", p.Status)
	}
}
