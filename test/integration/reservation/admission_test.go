package reservation

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// installAdmissionPolicy creates every object shipped in manifests/admission:
// the policies, their bindings and the cluster admin's parameter object
// (in rota-system, created here).
func installAdmissionPolicy(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	cp.InstallAdmissionPolicies(t)
}

// TestAdmissionPolicy checks that the API server, with the shipped
// ValidatingAdmissionPolicy, refuses claims and templates that reach for
// another namespace's reservation or for every reservation, and accepts a
// namespace's own members' templates.
func TestAdmissionPolicy(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace(tenant), framework.Namespace(outsiders))
	installAdmissionPolicy(t, cp)
	ctx := context.Background()

	tol := func(key string, op resourceapi.DeviceTolerationOperator, value string) []resourceapi.DeviceToleration {
		return []resourceapi.DeviceToleration{{Key: key, Operator: op, Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	}
	createTemplate := func(ns, name string, tols []resourceapi.DeviceToleration) error {
		_, err := cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, framework.SharedGPUTemplate(ns, name, 1024, tols), metav1.CreateOptions{})
		return err
	}
	// The policy takes effect once the API server has loaded it.
	framework.WaitFor(t, "the admission policy to refuse a foreign toleration", func(context.Context) (bool, string, error) {
		err := createTemplate(outsiders, "probe", reservedToleration(tenant, "serving"))
		if err == nil {
			return false, "accepted", cp.Client.ResourceV1().ResourceClaimTemplates(outsiders).Delete(ctx, "probe", metav1.DeleteOptions{})
		}
		return true, err.Error(), nil
	})

	tests := map[string]struct {
		namespace string
		create    func(ns, name string) error
		wantErr   string
	}{
		"own reservation's toleration is accepted": {
			namespace: tenant,
			create:    func(ns, n string) error { return createTemplate(ns, n, reservedToleration(tenant, "serving")) },
		},
		"other tolerations are accepted": {
			namespace: outsiders,
			create: func(ns, n string) error {
				return createTemplate(ns, n, tol(gpuv1.UnhealthyTaintKey, resourceapi.DeviceTolerationOpExists, ""))
			},
		},
		"another namespace's reservation is refused": {
			namespace: outsiders,
			create:    func(ns, n string) error { return createTemplate(ns, n, reservedToleration(tenant, "serving")) },
			wantErr:   `value "team-b.<reservation>"`,
		},
		"every reservation (Exists) is refused": {
			namespace: tenant,
			create: func(ns, n string) error {
				return createTemplate(ns, n, tol(gpuv1.ReservedTaintKey, resourceapi.DeviceTolerationOpExists, ""))
			},
			wantErr: "not allowed",
		},
		"every taint (empty key) is refused": {
			namespace: tenant,
			create: func(ns, n string) error {
				return createTemplate(ns, n, tol("", resourceapi.DeviceTolerationOpExists, ""))
			},
			wantErr: "not allowed",
		},
		"a claim, not only a template, is checked": {
			namespace: outsiders,
			create: func(ns, n string) error {
				tmpl := framework.SharedGPUTemplate(ns, n, 1024, reservedToleration(tenant, "serving"))
				_, err := cp.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}, Spec: tmpl.Spec.Spec,
				}, metav1.CreateOptions{})
				return err
			},
			wantErr: "spec.devices.requests[].exactly.tolerations",
		},
		"firstAvailable subrequests are checked": {
			namespace: outsiders,
			create: func(ns, n string) error {
				tmpl := framework.TieredClaimTemplate(ns, n, framework.ModelTier("H200"))
				tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable[0].Tolerations = reservedToleration(tenant, "serving")
				_, err := cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{})
				return err
			},
			wantErr: "firstAvailable[].tolerations",
		},
	}
	i := 0
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			i++
			err := tc.create(tc.namespace, "t"+strings.Repeat("x", i))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want a refusal containing %q", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), "rota-reserved-gpu-tolerations") {
				t.Errorf("refusal %q does not name the policy", err)
			}
			t.Logf("refused: %v", err)
		})
	}
}
