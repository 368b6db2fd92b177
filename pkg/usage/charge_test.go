package usage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// TestCharge: a reservation's GPUs are charged to its tenant once, used or
// not; its members' claims on them add nothing; other GPUs are charged to
// every tenant whose claims hold them, once per tenant.
func TestCharge(t *testing.T) {
	gpus := []GPU{
		{Model: "H200", ReservedBy: "team-a", Tenants: []string{"team-a", "team-a", "team-a"}}, // three members time-sliced
		{Model: "H200", ReservedBy: "team-a"},                                                  // held, idle
		{Model: "H200", Tenants: []string{"team-a"}},                                           // an ordinary pod of team-a
		{Model: "H200", Tenants: []string{"team-b", "team-c"}},                                 // shared by two tenants
		{Model: "H100", Tenants: []string{"team-b"}},
		{Model: "H100"}, // free
	}
	want := map[Key]Holding{
		{"team-a", "H200"}: {Reserved: 2, Charged: 3},
		{"team-b", "H200"}: {Charged: 1},
		{"team-c", "H200"}: {Charged: 1},
		{"team-b", "H100"}: {Charged: 1},
	}
	if diff := cmp.Diff(want, Charge(gpus)); diff != "" {
		t.Errorf("Charge (-want +got):\n%s", diff)
	}
}

// TestChargeStopsWhenTheReservationDoesNotDeliver: a Degraded reservation
// (a held GPU unhealthy or gone) and a Releasing one are not charged for
// what they hold; what their members' claims hold is charged as any
// other GPU. Bound, and a phase not yet known, are charged.
func TestChargeStopsWhenTheReservationDoesNotDeliver(t *testing.T) {
	for phase, want := range map[rotav1.ReservationPhase]map[Key]Holding{
		rotav1.ReservationBound:     {{"team-a", "H200"}: {Reserved: 2, Charged: 2}},
		"":                          {{"team-a", "H200"}: {Reserved: 2, Charged: 2}},
		rotav1.ReservationDegraded:  {{"team-a", "H200"}: {Charged: 1}},
		rotav1.ReservationReleasing: {{"team-a", "H200"}: {Charged: 1}},
	} {
		got := Charge([]GPU{
			{Model: "H200", ReservedBy: "team-a", ReservationPhase: phase, Tenants: []string{"team-a"}}, // a member runs
			{Model: "H200", ReservedBy: "team-a", ReservationPhase: phase},                              // held, idle
		})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("phase %q (-want +got):\n%s", phase, diff)
		}
	}
}

// TestMeterIntegrates: the holdings of each observation are charged for
// the time until the next; the first observation is only a baseline, and
// a clock going backwards charges nothing.
func TestMeterIntegrates(t *testing.T) {
	m := NewMeter()
	if err := m.Register(metrics.NewKubeRegistry()); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 10, 19, 8, 0, 0, 0, time.UTC)
	a := Key{"team-a", "H200"}
	m.Observe(t0, map[Key]Holding{a: {Reserved: 1, Charged: 2}})
	m.Observe(t0.Add(90*time.Minute), map[Key]Holding{a: {Reserved: 1, Charged: 1}})
	m.Observe(t0.Add(60*time.Minute), map[Key]Holding{a: {Reserved: 1, Charged: 1}}) // backwards: nothing
	m.Observe(t0.Add(150*time.Minute), map[Key]Holding{})
	m.Observe(t0.Add(200*time.Minute), map[Key]Holding{})
	for name, tc := range map[string]struct {
		got  func() (float64, error)
		want float64
	}{
		// 1 reserved GPU from 08:00 to 10:30.
		"reservation hours": {func() (float64, error) {
			return testutil.GetCounterMetricValue(m.reservationHours.WithLabelValues("team-a", "H200"))
		}, 2.5},
		// 2 GPUs for 1.5 h, then 1 GPU for 1 h.
		"GPU hours": {func() (float64, error) {
			return testutil.GetCounterMetricValue(m.gpuHours.WithLabelValues("team-a", "H200"))
		}, 4},
	} {
		got, err := tc.got()
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s = %v, want %v", name, got, tc.want)
		}
	}
}
