package scheduler

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// The tier observer's reservation check (MixedReservations), without a
// build tag so that it runs with the repository's tests.

// taintState is "free" when no taint is the reservation taint,
// "tolerated" when every reservation taint is tolerated, else "intruded".
func taintState(taints []resourceapi.DeviceTaint, tolerations []resourceapi.DeviceToleration) string {
	state := "free"
	for _, taint := range taints {
		if taint.Key != gpuv1.ReservedTaintKey {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(t resourceapi.DeviceToleration) bool {
			return resourceclaim.ToleratesTaint(t, taint)
		}) {
			return "intruded"
		}
		state = "tolerated"
	}
	return state
}

// worse of two reserved states: intruded over tolerated over free.
func worse(a, b string) string {
	rank := map[string]int{"free": 0, "tolerated": 1, "intruded": 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func TestTaintState(t *testing.T) {
	reserved := resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: "bench.team-a", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	other := resourceapi.DeviceTaint{Key: "example.com/broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	member := resourceapi.DeviceToleration{Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual, Value: "bench.team-a", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	otherTeam := member
	otherTeam.Value = "bench.team-b"
	anyReservation := resourceapi.DeviceToleration{Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpExists}
	for _, tc := range []struct {
		name   string
		taints []resourceapi.DeviceTaint
		tols   []resourceapi.DeviceToleration
		want   string
	}{
		{"untainted", nil, nil, "free"},
		{"another taint only", []resourceapi.DeviceTaint{other}, nil, "free"},
		{"member", []resourceapi.DeviceTaint{reserved}, []resourceapi.DeviceToleration{member}, "tolerated"},
		{"any reservation", []resourceapi.DeviceTaint{other, reserved}, []resourceapi.DeviceToleration{anyReservation}, "tolerated"},
		{"non-member", []resourceapi.DeviceTaint{reserved}, nil, "intruded"},
		{"another reservation's member", []resourceapi.DeviceTaint{reserved}, []resourceapi.DeviceToleration{otherTeam}, "intruded"},
	} {
		if got := taintState(tc.taints, tc.tols); got != tc.want {
			t.Errorf("%s: taintState = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := worse(worse("free", "intruded"), "tolerated"); got != "intruded" {
		t.Errorf("worse: %q, want intruded", got)
	}
}
