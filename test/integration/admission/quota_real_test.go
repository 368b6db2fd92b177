package admission

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
	"github.com/rota-dev/rota/test/integration/framework"
)

// sameModelPair is a template a tenant at its H100 limit might write to
// get two H100s past Quota's prediction: request "any" prefers an A100
// (else an H100), request "h100" wants an H100, and a constraint makes both
// the same model. Taking each request's first free tier, as Filter
// predicts, gives one A100 and one H100; the allocator, which honours the
// constraint, gives two H100s.
func sameModelPair(namespace, name string) *resourceapi.ResourceClaimTemplate {
	tmpl := framework.TieredClaimTemplate(namespace, name, framework.ModelTier("A100"), framework.ModelTier("H100"))
	spec := &tmpl.Spec.Spec.Devices
	spec.Requests[0].Name = "any"
	h100 := framework.ModelTier("H100")
	spec.Requests = append(spec.Requests, resourceapi.DeviceRequest{Name: "h100", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: gpuv1.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: h100.CEL}}},
	}})
	spec.Constraints = []resourceapi.DeviceConstraint{{
		Requests:       []string{"any", "h100"},
		MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(gpuv1.DriverName + "/model")),
	}}
	return tmpl
}

// TestQuotaChecksTheRealAllocation (#16 point 5): team-a may hold one
// H100. Its admin, with namespace rights only, submits a claim whose
// constraint makes the allocator grant two H100s where Filter predicts an
// A100 and an H100. Quota checks the allocation itself before the pod
// binds: the pod waits with QuotaExceeded, naming the grant and the
// limit, and no H100 is allocated. A claim within the limit still binds.
func TestQuotaChecksTheRealAllocation(t *testing.T) {
	cp := framework.StartControlPlaneWithRBAC(t)
	cp.Create(t, framework.Namespace("team-a"), framework.DeviceClass(),
		framework.Node("mix"), framework.GPUSlice("mix", framework.A100, framework.H100, framework.H100))
	cp.InstallAdmissionPolicies(t)
	cp.StartClaimController(t)
	cp.StartSchedulerWithPluginArgs(t, map[string]any{
		"Quota": map[string]any{"tenants": []any{map[string]any{"namespace": "team-a", "limits": map[string]any{"H100": 1}}}},
	})
	alice := cp.TenantAdmin(t, "team-a", "alice")
	ctx := context.Background()
	for _, tmpl := range []*resourceapi.ResourceClaimTemplate{
		sameModelPair("team-a", "pair"),
		framework.TieredClaimTemplate("team-a", "h100", framework.ModelTier("H100")),
	} {
		if _, err := alice.Client.ResourceV1().ResourceClaimTemplates("team-a").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a constraint that makes the allocator grant past the limit", func(t *testing.T) {
		if _, err := alice.Client.CoreV1().Pods("team-a").Create(ctx, framework.GPUPod("team-a", "pair", sched, "pair"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		msg := cp.WaitForWaiting(t, "team-a", "pair", string(waits.QuotaExceeded),
			"on node mix the allocator granted 2 H100", "team-a holds 0 of 1 H100 and this pod would take 2 more: 2 > 1")
		t.Logf("refused: %s", msg)
		if held := cp.AllocatedDevices(t); len(held) != 0 {
			t.Errorf("allocated %v, want nothing", held)
		}
	})
	t.Run("a claim within the limit binds", func(t *testing.T) {
		if _, err := alice.Client.CoreV1().Pods("team-a").Create(ctx, framework.GPUPod("team-a", "one", sched, "h100"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cp.WaitForPodBound(t, "team-a", "one")
		p, err := cp.Client.CoreV1().Pods("team-a").Get(ctx, "pair", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("pair bound to %s, want it still waiting", p.Spec.NodeName)
		}
	})
}
