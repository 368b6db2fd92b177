package tiering

import (
	"testing"

	"github.com/rota-dev/rota/pkg/reservation"
)

// TestReservedTaintKeyMatchesReservations keeps Tiering's copy of the key in
// step with the reservation controller that sets the taint.
func TestReservedTaintKeyMatchesReservations(t *testing.T) {
	if reservedTaintKey != reservation.TaintKey {
		t.Errorf("reservedTaintKey = %q, pkg/reservation.TaintKey = %q", reservedTaintKey, reservation.TaintKey)
	}
}
