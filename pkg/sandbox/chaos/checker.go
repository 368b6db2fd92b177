package chaos

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Invariant names, the report's rows.
const (
	InvAllocationExclusive = "allocation-exclusive"
	InvPreparedExclusive   = "prepared-exclusive"
	InvPreparedAllocated   = "prepared-only-where-allocated"
	InvCheckpointKubelet   = "checkpoint-matches-kubelet"
	InvTransitionOnce      = "transition-mutation-once"
	InvBoundaryTerminal    = "boundary-reaches-terminal"
	InvReservationBudget   = "reservation-budget"
	InvPendingHasReason    = "pending-pod-has-reason"
	InvNoOrphans           = "no-orphans-at-end"
)

// Invariants lists them in the report's order.
var Invariants = []string{
	InvAllocationExclusive, InvPreparedExclusive, InvPreparedAllocated, InvCheckpointKubelet,
	InvTransitionOnce, InvBoundaryTerminal, InvReservationBudget, InvPendingHasReason, InvNoOrphans,
}

// Violation is one broken invariant, first seen at At and seen Count times.
type Violation struct {
	At        time.Time `json:"at"`
	Invariant string    `json:"invariant"`
	Detail    string    `json:"detail"`
	Count     int       `json:"count"`
}

// tally counts the checks made and records violations, each distinct one
// once (a condition that lasts is seen at every poll).
type tally struct {
	mu         sync.Mutex
	checks     map[string]int
	violations map[string]*Violation
	order      []string
}

func newTally() *tally {
	return &tally{checks: map[string]int{}, violations: map[string]*Violation{}}
}

// checked counts n checks of invariant inv.
func (t *tally) checked(inv string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.checks[inv] += n
}

func (t *tally) violated(inv, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	t.mu.Lock()
	defer t.mu.Unlock()
	key := inv + "\x00" + detail
	if v := t.violations[key]; v != nil {
		v.Count++
		return
	}
	t.violations[key] = &Violation{At: time.Now().UTC(), Invariant: inv, Detail: detail, Count: 1}
	t.order = append(t.order, key)
}

func (t *tally) snapshot() (map[string]int, []Violation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	checks := make(map[string]int, len(t.checks))
	for k, v := range t.checks {
		checks[k] = v
	}
	out := make([]Violation, 0, len(t.order))
	for _, k := range t.order {
		out = append(out, *t.violations[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return checks, out
}
