package waits

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// counts builds a tier of two nodes, n1 and n2, with two GPUs each.
func counts(need int, free, tainted, preemptible, pinned [2]int) TierCounts {
	m := func(v [2]int) map[string]int { return map[string]int{"n1": v[0], "n2": v[1]} }
	return TierCounts{Label: "request gpu", Need: need, Matching: m([2]int{2, 2}), Free: m(free), Tainted: m(tainted), Preemptible: m(preemptible), Pinned: m(pinned)}
}

// withReserved adds reserved devices per node to c, held by the
// reservations named, one device each (the last takes the rest).
func withReserved(c TierCounts, reserved [2]int, names ...string) TierCounts {
	c.Reserved = map[string]int{"n1": reserved[0], "n2": reserved[1]}
	c.Reservations = map[string]int{}
	left := reserved[0] + reserved[1]
	for i, n := range names {
		c.Reservations[n] = 1
		if i == len(names)-1 {
			c.Reservations[n] = left
		}
		left--
	}
	return c
}

func TestClassify(t *testing.T) {
	none := [2]int{}
	cases := map[string]struct {
		in   Attempt
		want Verdict
	}{
		"fragmentation t=0: one GPU free in the pool, two needed": {
			in: Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 0}, none, none, none)}}},
			want: Verdict{Reason: InsufficientCapacity, Message: "request gpu: needs 2 GPUs, 1 free in the pool (n1: 1) of 4 matching; " +
				"preemption would not help: evicting every lower-priority pod leaves at most 1 free on one node (n1)"},
		},
		"fragmentation t=10: one free on each node, same node needed": {
			in: Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 1}, none, none, none)}}},
			want: Verdict{Reason: TopologyFragmentation, Message: "request gpu: needs 2 GPUs on one node; 2 free in the pool but spread (n1: 1, n2: 1), largest free block 1 on n1; " +
				"preemption would not help: evicting every lower-priority pod leaves at most 1 free on one node (n1)"},
		},
		"fragmented, a lower-priority pod could make room": {
			in: Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 1}, none, [2]int{0, 1}, none)}}},
			want: Verdict{Reason: TopologyFragmentation, Message: "request gpu: needs 2 GPUs on one node; 2 free in the pool but spread (n1: 1, n2: 1), largest free block 1 on n1; " +
				"evicting lower-priority pods could free 2 on n2, but Rota evicts only where a priority policy allows"},
		},
		"fragmentation conflict: pinned replicas on both nodes, a constraint conflict": {
			in: Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 1}, none, none, [2]int{1, 1})}}},
			want: Verdict{Reason: TopologyFragmentation, Unresolvable: true, Message: "constraint conflict, no placement exists: request gpu: needs 2 GPUs on one node; " +
				"2 free in the pool but spread (n1: 1, n2: 1), largest free block 1 on n1; pods that must keep running (PodDisruptionBudget) hold 2 of the matching GPUs (n1: 1, n2: 1), " +
				"so the largest block any node could offer is 1 on n1"},
		},
		"tainted GPUs would have been enough": {
			in:   Attempt{Requests: [][]TierCounts{{counts(2, [2]int{1, 0}, [2]int{0, 1}, none, none)}}},
			want: Verdict{Reason: Unhealthy, Message: "request gpu: needs 2 GPUs, 1 free and 1 more matching but tainted unhealthy (n2: 1)"},
		},
		"GPUs a reservation holds would have been enough": {
			in: Attempt{Requests: [][]TierCounts{{withReserved(counts(2, [2]int{1, 0}, none, none, none), [2]int{0, 1}, "team-a/serving")}}},
			want: Verdict{Reason: Reserved, Message: "request gpu: needs 2 GPUs, 1 free and 1 more matching but reserved by GPUReservation team-a/serving (n2: 1); " +
				"the pod is not a member of it (only members' claims tolerate a reservation's rota.dev/reserved taint)"},
		},
		"another namespace's reservation is not named": {
			in: Attempt{Requests: [][]TierCounts{{withReserved(counts(3, [2]int{1, 0}, none, none, none), [2]int{0, 2}, "team-a/mine", OtherNamespaces)}}},
			want: Verdict{Reason: Reserved, Message: "request gpu: needs 3 GPUs, 1 free and 2 more matching but reserved by GPUReservations team-a/mine (1) and of other namespaces (1) (n2: 2); " +
				"the pod is not a member of them (only members' claims tolerate a reservation's rota.dev/reserved taint)"},
		},
		"only other namespaces' reservations": {
			in: Attempt{Requests: [][]TierCounts{{withReserved(counts(2, [2]int{1, 0}, none, none, none), [2]int{0, 1}, OtherNamespaces)}}},
			want: Verdict{Reason: Reserved, Message: "request gpu: needs 2 GPUs, 1 free and 1 more matching but reserved by GPUReservations of other namespaces (n2: 1); " +
				"the pod is not a member of it (only members' claims tolerate a reservation's rota.dev/reserved taint)"},
		},
		"unhealthy GPUs decide when they alone make up the difference": {
			in:   Attempt{Requests: [][]TierCounts{{withReserved(counts(1, none, [2]int{1, 0}, none, none), [2]int{0, 1}, "team-a/serving")}}},
			want: Verdict{Reason: Unhealthy, Message: "request gpu: needs 1 GPU, 0 free and 1 more matching but tainted unhealthy (n1: 1)"},
		},
		"reserved and unhealthy GPUs needed together": {
			in: Attempt{Requests: [][]TierCounts{{withReserved(counts(2, none, [2]int{1, 0}, none, none), [2]int{0, 1}, "team-a/a")}}},
			want: Verdict{Reason: Reserved, Message: "request gpu: needs 2 GPUs, 0 free and 1 more matching but reserved by GPUReservation team-a/a (n2: 1) or tainted unhealthy (n1: 1); " +
				"the pod is not a member of it (only members' claims tolerate a reservation's rota.dev/reserved taint)"},
		},
		"two reservations": {
			in: Attempt{Requests: [][]TierCounts{{withReserved(counts(2, none, none, none, none), [2]int{1, 1}, "team-a/a", "team-b/b")}}},
			want: Verdict{Reason: Reserved, Message: "request gpu: needs 2 GPUs, 0 free and 2 more matching but reserved by GPUReservations team-a/a (1), team-b/b (1) (n1: 1, n2: 1); " +
				"the pod is not a member of them (only members' claims tolerate a reservation's rota.dev/reserved taint)"},
		},
		"too few even with the reserved GPUs: capacity, with the reservation named": {
			in: Attempt{Requests: [][]TierCounts{{withReserved(counts(4, none, none, none, none), [2]int{1, 0}, "team-a/serving")}}},
			want: Verdict{Reason: InsufficientCapacity, Message: "request gpu: needs 4 GPUs, 0 free in the pool (none) of 4 matching, 1 reserved by GPUReservation team-a/serving; " +
				"preemption would not help: no lower-priority pod holds a matching GPU"},
		},
		"refused by the reservation plugin as not a member": {
			in: Attempt{NotMember: "ReservationNotMember: pod's workload is not a member of GPUReservation team-a/serving",
				Requests: [][]TierCounts{{counts(1, [2]int{1, 0}, none, none, none)}}},
			want: Verdict{Reason: Reserved, Message: "refused by the Reservation plugin: ReservationNotMember: pod's workload is not a member of GPUReservation team-a/serving"},
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
				"preemption would not help: no lower-priority pod holds a matching GPU"},
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
			if diff := cmp.Diff(tc.want, Classify(tc.in), cmpopts.IgnoreFields(Verdict{}, "Detail")); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}
