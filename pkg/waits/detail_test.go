package waits

import (
	"strings"
	"testing"
)

// The condition's short message keeps what the Fairness plugin reads in
// it (eligible, pkg/plugins/fairness): a constraint conflict, nodes
// rejected by other plugins, the Reservation plugin's refusal.
func TestConditionMessageKeepsWhatFairnessReads(t *testing.T) {
	spread := TierCounts{Label: "request gpu", Name: "H100", Need: 2, Matching: map[string]int{"n1": 2, "n2": 2},
		Free: map[string]int{"n1": 1, "n2": 1}, Pinned: map[string]int{"n1": 1, "n2": 1}}
	fits := TierCounts{Label: "request gpu", Name: "H100", Need: 1, Matching: map[string]int{"n1": 1}, Free: map[string]int{"n1": 1}}
	cases := map[string]struct {
		a    Attempt
		want string
	}{
		"constraint conflict": {Attempt{Requests: [][]TierCounts{{spread}}}, "constraint conflict"},
		"nodes rejected": {Attempt{Requests: [][]TierCounts{{fits}}, Rejections: map[string]string{"n1": "NodeResourcesFit: Insufficient cpu"}},
			NodesRejected},
		"reservation refusal": {Attempt{NotMember: "ReservationNotMember: not a member"}, RefusedByReservation},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ConditionMessage(Classify(tc.a)); !strings.Contains(got, tc.want) {
				t.Errorf("condition message %q does not contain %q", got, tc.want)
			}
		})
	}
}
