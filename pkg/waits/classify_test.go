package waits

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// counts builds a tier of two nodes, n1 and n2, with two GPUs each.
func counts(need int, free, tainted, preemptible, pinned [2]int) TierCounts {
	m := func(v [2]int) map[string]int { return map[string]int{"n1": v[0], "n2": v[1]} }
	return TierCounts{Label: "request gpu", Need: need, Matching: m([2]int{2, 2}), Free: m(free), Tainted: m(tainted), Preemptible: m(preemptible), Pinned: m(pinned)}
}

func TestClassify(t *testing.T) {
	none := [2]int{}
	cases := map[string]struct {
		in   Attempt
		want Verdict
	}{
		"§8.5 t=0: one GPU free in the pool, two needed": {
			in: Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 0}, none, none, none)}}},
			want: Verdict{Reason: InsufficientCapacity, Message: "request gpu: needs 2 GPUs, 1 free in the pool (n1: 1) of 4 matching; " +
				"preemption would not help: evicting every lower-priority pod leaves at most 1 free on one node (n1)"},
		},
		"§8.5 t=10: one free on each node, same node needed": {
			in: Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 1}, none, none, none)}}},
			want: Verdict{Reason: TopologyFragmentation, Message: "request gpu: needs 2 GPUs on one node; 2 free in the pool but spread (n1: 1, n2: 1), largest free block 1 on n1; " +
				"preemption would not help: evicting every lower-priority pod leaves at most 1 free on one node (n1)"},
		},
		"fragmented, a lower-priority pod could make room": {
			in: Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 1}, none, [2]int{0, 1}, none)}}},
			want: Verdict{Reason: TopologyFragmentation, Message: "request gpu: needs 2 GPUs on one node; 2 free in the pool but spread (n1: 1, n2: 1), largest free block 1 on n1; " +
				"evicting lower-priority pods could free 2 on n2, but Rota evicts only where a priority policy allows"},
		},
		"§8.5 variant: pinned replicas on both nodes, a constraint conflict": {
			in: Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 1}, none, none, [2]int{1, 1})}}},
			want: Verdict{Reason: TopologyFragmentation, Unresolvable: true, Message: "constraint conflict, no placement exists: request gpu: needs 2 GPUs on one node; " +
				"2 free in the pool but spread (n1: 1, n2: 1), largest free block 1 on n1; pods that must keep running (PodDisruptionBudget) hold 2 of the matching GPUs (n1: 1, n2: 1), " +
				"so the largest block any node could offer is 1 on n1"},
		},
		"tainted GPUs would have been enough": {
			in:   Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 0}, [2]int{0, 1}, none, none)}}},
			want: Verdict{Reason: Unhealthy, Message: "request gpu: needs 2 GPUs, 1 free and 1 more matching but tainted unhealthy (n2: 1)"},
		},
		"quota first, whatever the pool says": {
			in:   Attempt{Quota: "QuotaExceeded: team-a holds 8 of 8 H100", Requests: [][]TierCounts{{counts(1, [2]int{1, 1}, none, none, none)}}},
			want: Verdict{Reason: QuotaExceeded, Message: "QuotaExceeded: team-a holds 8 of 8 H100"},
		},
		"reservation budget": {
			in:   Attempt{Reservation: "ReservationOvercommitted: 140000 MiB > 136582 MiB"},
			want: Verdict{Reason: ReservationOvercommitted, Message: "ReservationOvercommitted: 140000 MiB > 136582 MiB"},
		},
		"gang": {
			in:   Attempt{Gang: "gang train: 1 of 2 members"},
			want: Verdict{Reason: GangIncomplete, Message: "gang train: 1 of 2 members"},
		},
		"waiting its turn in the fair queue": {
			in:   Attempt{Turn: "queued behind y/y-0", Requests: [][]TierCounts{{counts(1, [2]int{1, 1}, none, none, none)}}},
			want: Verdict{Reason: NotAttempted, Message: "queued behind y/y-0"},
		},
		"no matching device at all is a shortage, not a conflict": {
			in: Attempt{Requests: [][]TierCounts{{{Label: "tier 1/1 h100", Need: 1, Matching: map[string]int{}, Free: map[string]int{}}}}},
			want: Verdict{Reason: InsufficientCapacity, Message: "tier 1/1 h100: needs 1 GPU, 0 free in the pool (none) of 0 matching; " +
				"preemption would not help: evicting every lower-priority pod leaves at most 0 free on one node (no node)"},
		},
		"devices free but the claim's constraints fail there": {
			in:   Attempt{Requests: [][]TierCounts{{counts(2, [2]int{2, 0}, none, none, none)}}, DeviceConstraintNodes: []string{"n1"}},
			want: Verdict{Reason: TopologyFragmentation, Message: "request gpu: 2 free (n1: 2) but the claim's constraints cannot be met together on n1"},
		},
		"devices free but the node is full of CPU": {
			in:   Attempt{Requests: [][]TierCounts{{counts(1, [2]int{1, 0}, none, none, none)}}, Rejections: map[string]string{"n1": "NodeResourcesFit: Insufficient cpu"}},
			want: Verdict{Reason: InsufficientCapacity, Message: "request gpu: 1 free (n1: 1) but those nodes are rejected (n1: NodeResourcesFit: Insufficient cpu)"},
		},
		"best tier of a request decides, the worst request decides the pod": {
			in: Attempt{Requests: [][]TierCounts{
				{counts(1, [2]int{0, 0}, none, none, none), counts(1, [2]int{0, 1}, none, none, none)},
				{counts(2, [2]int{1, 1}, none, none, none)},
			}},
			want: Verdict{Reason: TopologyFragmentation, Message: "request gpu: needs 2 GPUs on one node; 2 free in the pool but spread (n1: 1, n2: 1), largest free block 1 on n1; " +
				"preemption would not help: evicting every lower-priority pod leaves at most 1 free on one node (n1)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Classify(tc.in)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}
