package waits

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// Each admission reason a plugin records lands in its own part of the
// attempt, whatever its message says; other reasons are not admitted.
func TestAdmit(t *testing.T) {
	msg := "ReservationOvercommitted: QuotaExceeded: words that name other reasons"
	for reason, want := range map[Reason]Attempt{
		QuotaExceeded:            {Quota: msg},
		ReservationOvercommitted: {Reservation: msg},
		Reserved:                 {NotMember: msg},
		GangIncomplete:           {Gang: msg},
		NotAttempted:             {Turn: msg},
		InsufficientCapacity:     {},
		"":                       {},
	} {
		var a Attempt
		ok := a.Admit(Refusal{Reason: reason, Message: msg})
		if ok != !cmp.Equal(want, Attempt{}) {
			t.Errorf("Admit(%q) = %v", reason, ok)
		}
		if diff := cmp.Diff(want, a); diff != "" {
			t.Errorf("Admit(%q) (-want +got):\n%s", reason, diff)
		}
	}
}

func TestCauses(t *testing.T) {
	c := CausesOrNew(nil)
	c.Set("a", CauseConstraintConflict)
	c.Set("b", CauseNodesRejected)
	c.Set("b", "")
	c.Set("c", CauseRefusedByReservation)
	c.Forget("c")
	for uid, want := range map[types.UID]Cause{"a": CauseConstraintConflict, "b": "", "c": "", "d": ""} {
		if got := c.Of(uid); got != want {
			t.Errorf("Of(%s) = %q, want %q", uid, got, want)
		}
	}
	if CausesOrNew(c) != c {
		t.Error("CausesOrNew(c) is not c")
	}
}
