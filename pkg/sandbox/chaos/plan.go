package chaos

import (
	"math/rand/v2"
	"time"
)

// Kill is one decision of the fault injector: wait After (from the previous
// kill's restart), SIGKILL the component at index Victim, start it again
// Down later.
type Kill struct {
	After  time.Duration `json:"after"`
	Victim int           `json:"victim"`
	Down   time.Duration `json:"down"`
}

// Timing bounds the injector's random choices.
type Timing struct {
	// MinGap and MaxGap bound the wait between one kill's restart and the
	// next kill.
	MinGap, MaxGap time.Duration
	// MaxDown bounds how long a killed component stays down.
	MaxDown time.Duration
}

// PlanKills draws n kill decisions among victims components from seed. The
// same arguments give the same decisions: a run is replayed with its seed
// (what the components were doing at each moment depends on timing, which
// no seed fixes).
func PlanKills(seed uint64, n, victims int, t Timing) []Kill {
	r := rand.New(rand.NewPCG(seed, 0x6b696c6c)) // "kill"
	kills := make([]Kill, n)
	for i := range kills {
		kills[i] = Kill{
			After:  t.MinGap + time.Duration(r.Int64N(int64(t.MaxGap-t.MinGap)+1)),
			Victim: r.IntN(victims),
			Down:   time.Duration(r.Int64N(int64(t.MaxDown) + 1)),
		}
	}
	return kills
}

// churnRand and faultRand are the seeded sources of the workload's choices
// (pod arrivals and lifetimes; GPU faults and recoveries), each apart from
// the kills' so that a change in the workload does not move the kills.
func churnRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x636875726e)) } // "churn"
func faultRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6661756c74)) } // "fault"

// between draws a duration in [lo, hi].
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}
