package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 10, 21, 8, 0, 0, 0, time.UTC))
	res := &rotav1.GPUReservation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", Generation: 3}, Spec: rotav1.GPUReservationSpec{NodeName: "n1"}}
	h200 := func(i int, healthy bool) GPU {
		return GPU{Pool: "n1", Device: "gpu-" + string(rune('0'+i)), UUID: "GPU-" + string(rune('0'+i)), Model: "H200", MemoryMiB: 143771, Healthy: healthy}
	}
	h100 := GPU{Pool: "n1", Device: "gpu-9", UUID: "GPU-9", Model: "H100", MemoryMiB: 81559, Healthy: true}
	type want struct {
		phase      rotav1.ReservationPhase
		budget     int64
		count      int32
		conditions map[string]string // type -> status/reason
	}
	tests := map[string]struct {
		held       []GPU
		selErr     *SelectionError
		mismatches []mismatch
		want       want
	}{
		"nothing held": {
			selErr: &SelectionError{ReasonTooManyGPUs, "spec.count: 9 GPUs asked, node n1 has 8"},
			want: want{phase: rotav1.ReservationPending, conditions: map[string]string{
				ConditionReady: "False/" + ReasonTooManyGPUs, ConditionDegraded: "False/NotHeld", ConditionPlacementMismatch: "False/NotHeld",
			}},
		},
		"one healthy H200": {
			held: []GPU{h200(0, true)},
			want: want{phase: rotav1.ReservationBound, budget: 136582, count: 1, conditions: map[string]string{
				ConditionReady: "True/GPUsHeld", ConditionDegraded: "False/AllHealthy", ConditionPlacementMismatch: "False/Converged",
			}},
		},
		"budget is the smallest GPU's": {
			held: []GPU{h200(0, true), h100},
			want: want{phase: rotav1.ReservationBound, budget: 77481, count: 2, conditions: map[string]string{
				ConditionReady: "True/GPUsHeld", ConditionDegraded: "False/AllHealthy", ConditionPlacementMismatch: "False/Converged",
			}},
		},
		"an unhealthy held GPU degrades": {
			held: []GPU{h200(0, true), h200(1, false)},
			want: want{phase: rotav1.ReservationDegraded, budget: 136582, count: 2, conditions: map[string]string{
				ConditionReady: "True/GPUsHeld", ConditionDegraded: "True/GPUUnhealthy", ConditionPlacementMismatch: "False/Converged",
			}},
		},
		"a member outside": {
			held:       []GPU{h200(0, true)},
			mismatches: []mismatch{{pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m-0"}}, member: "m", device: "gpu-3"}},
			want: want{phase: rotav1.ReservationBound, budget: 136582, count: 1, conditions: map[string]string{
				ConditionReady: "True/GPUsHeld", ConditionDegraded: "False/AllHealthy", ConditionPlacementMismatch: "True/PlacementMismatch",
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := computeStatus(res, tc.held, 9500, tc.selErr, nil, tc.mismatches, now)
			got := want{phase: st.Phase, budget: st.BudgetMiBPerGPU, count: st.GPUCount, conditions: map[string]string{}}
			for _, c := range st.Conditions {
				got.conditions[c.Type] = string(c.Status) + "/" + c.Reason
				if c.ObservedGeneration != 3 {
					t.Errorf("condition %s observedGeneration = %d, want 3", c.Type, c.ObservedGeneration)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if len(st.Devices) != len(tc.held) {
				t.Errorf("status lists %d devices, want %d", len(st.Devices), len(tc.held))
			}
		})
	}
}

// TestComputeStatusStable: recomputing an unchanged status changes nothing,
// so the controller writes only when something changed.
func TestComputeStatusStable(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 10, 21, 8, 0, 0, 0, time.UTC))
	res := &rotav1.GPUReservation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}, Spec: rotav1.GPUReservationSpec{NodeName: "n1"}}
	held := []GPU{{Pool: "n1", Device: "gpu-0", UUID: "GPU-0", MemoryMiB: 143771, Healthy: true}}
	res.Status = computeStatus(res, held, 9500, nil, nil, nil, t0)
	again := computeStatus(res, held, 9500, nil, nil, nil, metav1.NewTime(t0.Add(time.Hour)))
	if diff := cmp.Diff(res.Status, again); diff != "" {
		t.Errorf("status changed on recompute (-before +after):\n%s", diff)
	}
}
