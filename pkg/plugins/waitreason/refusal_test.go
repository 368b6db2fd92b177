package waitreason

import "testing"

// The Reservation plugin's membership refusals are told apart from its
// other answers, which keep their own reasons.
func TestReservationRefusal(t *testing.T) {
	for msg, want := range map[string]bool{
		"ReservationNotMember: pod's workload (no controller) is not a member of GPUReservation team-a/serving":       true,
		"ReservationNotTolerated: pod is member a of GPUReservation team-a/serving but its claim c does not tolerate": true,
		"ReservationOvercommitted: GPUReservation team-a/serving budget is 136582 MiB":                                false,
		"ReservationNotHeld: GPUReservation team-a/serving holds no GPUs":                                             false,
		"ReservationMemoryMissing: pod is member a of time-sliced GPUReservation team-a/serving":                      false,
	} {
		if got := reservationRefusal(msg); got != want {
			t.Errorf("reservationRefusal(%q) = %v, want %v", msg, got, want)
		}
	}
}
