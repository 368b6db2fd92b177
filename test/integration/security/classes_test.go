package security

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// applyTenantQuota creates the shipped manifests/tenant ResourceQuota in
// namespace and writes its status as the quota controller would (none
// runs here), so the API server's quota admission charges claims.
func applyTenantQuota(t *testing.T, cp *framework.ControlPlane, namespace string) *v1.ResourceQuota {
	t.Helper()
	ctx := context.Background()
	var q *v1.ResourceQuota
	for _, m := range framework.Manifests(t, "manifests/tenant/resourcequota.yaml") {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, &q); err != nil {
			t.Fatal(err)
		}
	}
	q.Namespace = namespace
	q, err := cp.Client.CoreV1().ResourceQuotas(namespace).Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status = v1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: v1.ResourceList{}}
	for k := range q.Spec.Hard {
		q.Status.Used[k] = resource.MustParse("0")
	}
	if q, err = cp.Client.CoreV1().ResourceQuotas(namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return q
}

// classClaim is a claim of one device of class.
func classClaim(namespace, name, class string) *resourceapi.ResourceClaim {
	c := framework.DeviceClaim(namespace, name, 1)
	c.Spec.Devices.Requests[0].Exactly.DeviceClassName = class
	return c
}

// TestEveryGPUClassCounted: issue #16 points 6 and 7 (matchPolicy). In a
// namespace with the shipped tenant ResourceQuota, a claim may name only
// DeviceClasses the quota counts (or its own reservation's class); the
// time-sliced class counts each device, whatever sharing a claim asks for;
// the tenant cannot change or remove its quota; and requests made through
// resource.k8s.io's beta versions meet the same v1 rules.
func TestEveryGPUClassCounted(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	applyTenantQuota(t, e.cp, teamA)
	// A class a cluster admin adds beside the shipped ones: it selects the
	// same GPUs, and the tenant's quota has no line for it.
	if _, err := e.cp.Client.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "h100.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", gpuv1.DriverName),
		}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the class policy to read team-a's quota", func(ctx context.Context) (bool, string, error) {
		_, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, classClaim(teamA, "probe", "h100.example.com"), dryRun)
		return err != nil, fmt.Sprint(err), nil
	})
	createClaim := func(c *resourceapi.ResourceClaim, opts metav1.CreateOptions) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := e.alice.ResourceV1().ResourceClaims(c.Namespace).Create(ctx, c, opts)
			return err
		}
	}

	l.hostile(t, "claim of a GPU class the quota does not count", createClaim(classClaim(teamA, "uncounted", "h100.example.com"), dryRun),
		"rota-gpu-classes-counted", "does not count DeviceClass h100.example.com", "gpu.rota.dev")
	l.hostile(t, "claim template of a GPU class the quota does not count", func(ctx context.Context) error {
		tmpl := framework.WithDeviceClass(framework.SharedGPUTemplate(teamA, "uncounted", 0, nil), "h100.example.com")
		_, err := e.alice.ResourceV1().ResourceClaimTemplates(teamA).Create(ctx, tmpl, dryRun)
		return err
	}, "rota-gpu-classes-counted", "h100.example.com")
	l.hostile(t, "firstAvailable tier of a class the quota does not count", func(ctx context.Context) error {
		tmpl := framework.TieredClaimTemplate(teamA, "tiered", framework.ModelTier("H100"), framework.ModelTier("A100"))
		tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable[1].DeviceClassName = "h100.example.com"
		_, err := e.alice.ResourceV1().ResourceClaimTemplates(teamA).Create(ctx, tmpl, dryRun)
		return err
	}, "rota-gpu-classes-counted", "firstAvailable[].deviceClassName")
	l.hostile(t, "claim of another namespace's reservation class", createClaim(classClaim(teamA, "theirs", reservationClass(teamB, "serving")), dryRun),
		"does not count DeviceClass team-b.serving.reservation.rota.dev")
	exclusive := framework.WithDeviceClass(framework.SharedGPUTemplate(teamA, "x", 0, nil), "timesliced.gpu.rota.dev")
	exclusive.Spec.Spec.Devices.Config[0].Opaque.Parameters.Raw = []byte(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Exclusive"}}`)
	l.hostile(t, "time-sliced class turned exclusive by the claim's config, beyond the quota", createClaim(&resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "exclusive"}, Spec: exclusive.Spec.Spec,
	}, metav1.CreateOptions{}), "exceeded quota: rota-gpus", "timesliced.gpu.rota.dev.deviceclass.resource.k8s.io/devices")
	l.hostile(t, "tenant raises its own quota", func(ctx context.Context) error {
		patch := []byte(`{"spec":{"hard":{"timesliced.gpu.rota.dev.deviceclass.resource.k8s.io/devices":"100"}}}`)
		_, err := e.alice.CoreV1().ResourceQuotas(teamA).Patch(ctx, "rota-gpus", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}, "forbidden")
	l.hostile(t, "tenant deletes its quota to lift the class check", func(ctx context.Context) error {
		return e.alice.CoreV1().ResourceQuotas(teamA).Delete(ctx, "rota-gpus", metav1.DeleteOptions{})
	}, "forbidden")

	// Through the beta versions: the policies match v1 with matchPolicy
	// Equivalent, so these requests are converted and checked alike.
	dyn, err := dynamic.NewForConfig(e.cp.ImpersonateUser(alice))
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"v1beta1", "v1beta2"} {
		gvr := schema.GroupVersionResource{Group: "resource.k8s.io", Version: version, Resource: "resourceclaims"}
		betaClaim := func(name, class string, tolerations []any) *unstructured.Unstructured {
			req := map[string]any{"name": "gpu", "deviceClassName": class, "allocationMode": "ExactCount", "count": int64(1)}
			if tolerations != nil {
				req["tolerations"] = tolerations
			}
			if version == "v1beta2" { // v1beta2 nests an exact request as v1 does
				req = map[string]any{"name": "gpu", "exactly": map[string]any{
					"deviceClassName": class, "allocationMode": "ExactCount", "count": int64(1), "tolerations": tolerations,
				}}
				if tolerations == nil {
					delete(req["exactly"].(map[string]any), "tolerations")
				}
			}
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "resource.k8s.io/" + version, "kind": "ResourceClaim",
				"metadata": map[string]any{"namespace": teamA, "name": name},
				"spec":     map[string]any{"devices": map[string]any{"requests": []any{req}}},
			}}
		}
		create := func(u *unstructured.Unstructured) func(context.Context) error {
			return func(ctx context.Context) error {
				_, err := dyn.Resource(gvr).Namespace(teamA).Create(ctx, u, dryRun)
				return err
			}
		}
		if _, err := e.cp.Client.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/" + version); err != nil {
			t.Logf("resource.k8s.io/%s is not served: %v", version, err)
			continue
		}
		foreign := []any{map[string]any{"key": gpuv1.ReservedTaintKey, "operator": "Equal", "value": gpuv1.ReservedTaintValue(teamB, "serving"), "effect": "NoSchedule"}}
		l.hostile(t, version+" claim tolerating another namespace's reservation", create(betaClaim("beta-foreign", gpuv1.DeviceClassName, foreign)),
			"rota-reserved-gpu-tolerations", `value "team-a.<reservation>"`)
		l.hostile(t, version+" claim of a class the quota does not count", create(betaClaim("beta-uncounted", "h100.example.com", nil)),
			"rota-gpu-classes-counted")
		t.Run(version+" claim of a counted class is accepted", func(t *testing.T) {
			if err := create(betaClaim("beta-ok", gpuv1.DeviceClassName, nil))(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}

	// What stays allowed: a counted class, charged; the namespace's own
	// reservation class; a namespace without the quota is not limited.
	t.Run("a counted class is accepted and charged", func(t *testing.T) {
		if err := createClaim(classClaim(teamA, "counted", gpuv1.DeviceClassName), metav1.CreateOptions{})(ctx); err != nil {
			t.Fatal(err)
		}
		if err := createClaim(classClaim(teamA, "own-reservation", reservationClass(teamA, "serving")), dryRun)(ctx); err != nil {
			t.Fatalf("own reservation's class: %v", err)
		}
		q, err := e.cp.Client.CoreV1().ResourceQuotas(teamA).Get(ctx, "rota-gpus", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if used := q.Status.Used[v1.ResourceName(gpuv1.DeviceClassName+".deviceclass.resource.k8s.io/devices")]; used.Value() != 1 {
			t.Errorf("quota used %v, want 1 gpu.rota.dev device charged", q.Status.Used)
		}
		if _, err := e.bob.ResourceV1().ResourceClaims(teamB).Create(ctx, classClaim(teamB, "free", "h100.example.com"), dryRun); err != nil {
			t.Errorf("team-b has no rota-gpus quota and is refused: %v", err)
		}
	})
}
