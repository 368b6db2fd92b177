package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/advisor"
	"github.com/rota-dev/rota/pkg/sandbox/scenario"
)

func TestCheck(t *testing.T) {
	st := &State{
		Pods: []Pod{
			{Name: "ml/llama-1", Phase: "Running", Node: "n1", Devices: []Device{{Node: "n1", Name: "gpu-0", Model: "H100"}},
				Annotations: map[string]string{"rota.dev/borrowed": "H100=2"}},
			{Name: "ml/llama-2", Phase: "Pending", Waiting: &Waiting{Code: "InsufficientCapacity", Reason: "Unschedulable", Message: "no free GPU",
				Advice: []advisor.Option{{Kind: advisor.KindMove, Summary: "evict ml/x (1 × H100) on n1 → ml/llama-2 fits on n1"}}}},
			{Name: "ml/llama-3", Phase: "Terminating"},
		},
		Targets:      []Target{{Schedule: "ml/s", Target: "llama", Phase: "Converged"}},
		Reservations: []Reservation{{Name: "ml/r", Phase: "Bound", BudgetUsedMiB: 2048}},
		Quotas: []Quota{{Name: "team-b", GuaranteesFit: "False", Reason: "ExceedPool",
			Message: "H100: guarantees 24 (team-a 8, team-b 16) exceed the 16 healthy GPUs by 8"}},
		// ml/b-7 is gone; its Events stay.
		Events: []PodEvent{
			{Pod: "ml/b-7", Reason: "Checkpoint", Type: "Warning", Note: "no acknowledgement within grace 10s; evicting"},
			{Pod: "ml/b-7", Reason: "Reclaimed", Type: "Normal", Note: "evicted for team-a"},
		},
	}
	tests := map[string]struct {
		exp  scenario.Expect
		h    History
		want []string
	}{
		"everything holds": {
			exp: scenario.Expect{
				Pods:         []scenario.PodExpect{{Name: "ml/llama-*", Count: ptr.To(2)}, {Name: "ml/llama-2", Waiting: true, WaitReason: "InsufficientCapacity", ReasonContains: "free"}},
				Targets:      []scenario.TargetExpect{{Schedule: "ml/s", Target: "llama", Phase: "Converged"}},
				Reservations: []scenario.ReservationExpect{{Name: "ml/r", Phase: "Bound", MaxBudgetUsedMiB: ptr.To[int64](4096)}},
				MinReady:     []scenario.ReadyExpect{{Workload: "ml/llama", Count: 1}},
			},
			h: History{MinReady: map[string]int{"ml/llama": 1}},
		},
		"advice": {
			exp:  scenario.Expect{Pods: []scenario.PodExpect{{Name: "ml/llama-2", AdviceContains: "move: evict ml/x"}, {Name: "ml/llama-2", AdviceContains: "none: "}}},
			want: []string{`pod ml/llama-2: advice does not mention "none: " (move: evict ml/x (1 × H100) on n1 → ml/llama-2 fits on n1)`},
		},
		"annotations": {
			exp: scenario.Expect{Pods: []scenario.PodExpect{
				{Name: "ml/llama-1", Annotations: map[string]string{"rota.dev/borrowed": "H100=*"}},
				{Name: "ml/llama-*", Annotations: map[string]string{"rota.dev/borrowed": "", "rota.dev/checkpoint-requested": "*"}},
			}},
			want: []string{
				`pod ml/llama-1: annotation rota.dev/borrowed is "H100=2", want none`,
				`pod ml/llama-1: no annotation rota.dev/checkpoint-requested, want "*"`,
				`pod ml/llama-2: no annotation rota.dev/checkpoint-requested, want "*"`,
			},
		},
		"events of a deleted pod": {
			exp: scenario.Expect{Events: []scenario.EventExpect{
				{Pod: "ml/b-7", Reason: "Checkpoint", MessageContains: "grace 10s"},
				{Pod: "ml/b-7", Reason: "Reclaimed", MessageContains: "team-c"},
				{Pod: "ml/b-6", Reason: "Reclaimed"},
			}},
			want: []string{
				`pod ml/b-7: no Reclaimed Event mentions "team-c" (evicted for team-a)`,
				"pod ml/b-6: no Reclaimed Event",
			},
		},
		"quotas": {
			exp: scenario.Expect{Quotas: []scenario.QuotaExpect{
				{Name: "team-b", GuaranteesFit: "False", Reason: "ExceedPool", MessageContains: "exceed the 16 healthy GPUs by 8"},
				{Name: "team-b", GuaranteesFit: "True"},
				{Name: "team-b", MessageContains: "by 4"},
				{Name: "team-a"},
			}},
			want: []string{
				`GPUQuota team-b: GuaranteesFit "False" (ExceedPool: H100: guarantees 24 (team-a 8, team-b 16) exceed the 16 healthy GPUs by 8), want True`,
				`GPUQuota team-b: GuaranteesFit message does not mention "by 4" (H100: guarantees 24 (team-a 8, team-b 16) exceed the 16 healthy GPUs by 8)`,
				"GPUQuota team-a: not found",
			},
		},
		"terminating pods do not count": {
			exp:  scenario.Expect{Pods: []scenario.PodExpect{{Name: "ml/llama-*", Count: ptr.To(3)}, {Name: "ml/llama-3"}}},
			want: []string{"pods ml/llama-*: 2 match, want 3", "pods ml/llama-3: none"},
		},
		"pod expectations, in order": {
			exp: scenario.Expect{Pods: []scenario.PodExpect{{Name: "ml/llama-1", Phase: "Pending", Node: "n2", GPUs: ptr.To(2), Model: "A100", Waiting: true, WaitReason: "QuotaExceeded"}}},
			want: []string{
				"pod ml/llama-1: phase Running, want Pending",
				`pod ml/llama-1: on node "n1", want "n2"`,
				"pod ml/llama-1: holds 1 GPUs, want 2",
				"pod ml/llama-1: holds n1 gpu-0 (H100), want A100",
				"pod ml/llama-1: placed on n1, want it waiting",
				`pod ml/llama-1: waits with reason code "", want QuotaExceeded (not waiting)`,
			},
		},
		"targets, reservations and history": {
			exp: scenario.Expect{
				Targets:      []scenario.TargetExpect{{Schedule: "ml/s", Target: "llama", Phase: "Failed"}, {Schedule: "ml/t", Target: "x"}},
				Reservations: []scenario.ReservationExpect{{Name: "ml/r", MaxBudgetUsedMiB: ptr.To[int64](1024)}, {Name: "ml/q"}},
				Transitions:  ptr.To(2), MaxGPUsInUse: ptr.To(1),
				MinReady: []scenario.ReadyExpect{{Workload: "ml/llama", Count: 2}},
			},
			h: History{Transitions: 1, MaxGPUsInUse: 3, DoubleBooked: []string{"n1/gpu-0 is allocated to a/x and b/y"}},
			want: []string{
				"n1/gpu-0 is allocated to a/x and b/y",
				"schedule ml/s target llama: phase Converged (), want Failed",
				"schedule ml/t target x: no status",
				"reservation ml/r: 2048 MiB used, want at most 1024",
				"reservation ml/q: not found",
				"1 transitions so far, want 2",
				"3 GPUs were in use at once, want at most 1",
				"workload ml/llama had 0 Ready pods at one point since the previous checkpoint, want at least 2",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Check(tc.exp, st, tc.h)); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
		})
	}
}
