package fairness

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
)

// A pod goes first only when freed devices would help it: not after an
// admission answer, nor after a wait whose cause the WaitReason plugin
// recorded as a conflict or a rejection of every node. The cause is read
// from that record: the tenant owns the pod's annotations, and a cause it
// writes into rota.dev/wait-detail (to pass as eligible, or not) counts
// for nothing.
func TestEligible(t *testing.T) {
	waiting := func(reason waits.Reason, forgedCause waits.Cause) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p", UID: "uid-p"}}
		p.Status.Conditions = []v1.PodCondition{{Type: gpuv1.WaitingCondition, Status: v1.ConditionTrue, Reason: string(reason)}}
		if forgedCause != "" {
			d, err := waits.EncodeDetail(waits.Detail{Cause: forgedCause})
			if err != nil {
				t.Fatal(err)
			}
			p.Annotations = map[string]string{gpuv1.WaitDetailAnnotation: d}
		}
		return p
	}
	for name, tc := range map[string]struct {
		pod      *v1.Pod
		recorded waits.Cause
		want     bool
	}{
		"never waited":                           {pod: &v1.Pod{}, want: true},
		"waits for capacity":                     {pod: waiting(waits.InsufficientCapacity, ""), want: true},
		"over its quota":                         {pod: waiting(waits.QuotaExceeded, ""), want: false},
		"gang incomplete":                        {pod: waiting(waits.GangIncomplete, ""), want: false},
		"constraint conflict":                    {pod: waiting(waits.InsufficientCapacity, ""), recorded: waits.CauseConstraintConflict, want: false},
		"its nodes rejected":                     {pod: waiting(waits.InsufficientCapacity, ""), recorded: waits.CauseNodesRejected, want: false},
		"refused by a reservation":               {pod: waiting(waits.Reserved, ""), recorded: waits.CauseRefusedByReservation, want: false},
		"tenant removes the cause it was given":  {pod: waiting(waits.InsufficientCapacity, ""), recorded: waits.CauseConstraintConflict, want: false},
		"tenant writes a cause it was not given": {pod: waiting(waits.InsufficientCapacity, waits.CauseConstraintConflict), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			tc.pod.UID = "uid-p"
			turn := &turnChecker{causes: waits.NewCauses()}
			turn.causes.Set(tc.pod.UID, tc.recorded)
			if got := turn.eligible(tc.pod); got != tc.want {
				t.Errorf("eligible = %v, want %v", got, tc.want)
			}
		})
	}
}
