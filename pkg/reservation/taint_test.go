package reservation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

func TestTolerationsOf(t *testing.T) {
	tol := func(key string, op resourceapi.DeviceTolerationOperator, value string, effect resourceapi.DeviceTaintEffect) resourceapi.DeviceToleration {
		return resourceapi.DeviceToleration{Key: key, Operator: op, Value: value, Effect: effect}
	}
	eq, exists := resourceapi.DeviceTolerationOpEqual, resourceapi.DeviceTolerationOpExists
	tests := map[string]struct {
		tols         []resourceapi.DeviceToleration
		want         []string
		wantWildcard bool
	}{
		"none":                    {},
		"the reservation's own":   {tols: []resourceapi.DeviceToleration{Toleration("ns", "r")}, want: []string{"ns.r"}},
		"any effect counts":       {tols: []resourceapi.DeviceToleration{tol(gpuv1.ReservedTaintKey, eq, "ns.r", "")}, want: []string{"ns.r"}},
		"NoExecute only does not": {tols: []resourceapi.DeviceToleration{tol(gpuv1.ReservedTaintKey, eq, "ns.r", resourceapi.DeviceTaintEffectNoExecute)}},
		"Exists on the key":       {tols: []resourceapi.DeviceToleration{tol(gpuv1.ReservedTaintKey, exists, "", "")}, wantWildcard: true},
		"empty key tolerates all": {tols: []resourceapi.DeviceToleration{tol("", exists, "", "")}, wantWildcard: true},
		"other keys are not ours": {tols: []resourceapi.DeviceToleration{tol(gpuv1.UnhealthyTaintKey, exists, "", "")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, wildcard := TolerationsOf(tc.tols)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if wildcard != tc.wantWildcard {
				t.Errorf("wildcard = %v, want %v", wildcard, tc.wantWildcard)
			}
		})
	}
}
