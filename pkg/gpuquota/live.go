package gpuquota

import (
	"sync"
	"sync/atomic"
	"time"
)

// Live is what the scheduler's plugins share about guarantees: the current
// table (swapped whole when a GPUQuota changes) and the reclaims under way.
// While a reclaim of a model is under way, no pod may borrow that model:
// the GPUs its victims free are kept for the tenant that reclaims them.
type Live struct {
	table atomic.Pointer[Table]

	mu sync.Mutex
	// reclaims maps a model to the units reclaiming it and when each
	// reclaim lapses.
	reclaims map[string]map[string]time.Time
}

// NewLive returns a Live with an empty table.
func NewLive() *Live {
	l := &Live{reclaims: map[string]map[string]time.Time{}}
	l.table.Store(&Table{tenants: map[string]*Tenant{}, guaranteed: map[string]bool{}})
	return l
}

// LiveOrNew returns l, or a new Live when l is nil.
func LiveOrNew(l *Live) *Live {
	if l == nil {
		return NewLive()
	}
	return l
}

// Table is the current table.
func (l *Live) Table() *Table { return l.table.Load() }

// SetTable swaps the table.
func (l *Live) SetTable(t *Table) { l.table.Store(t) }

// StartReclaim records that unit reclaims model until the given time.
func (l *Live) StartReclaim(model, unit string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reclaims[model] == nil {
		l.reclaims[model] = map[string]time.Time{}
	}
	l.reclaims[model][unit] = until
}

// EndReclaim records that unit's reclaim of model is over.
func (l *Live) EndReclaim(model, unit string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.reclaims[model], unit)
}

// Reclaiming returns a unit reclaiming model at now (the first by name);
// false when none is.
func (l *Live) Reclaiming(model string, now time.Time) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := ""
	for unit, until := range l.reclaims[model] {
		if !now.Before(until) {
			delete(l.reclaims[model], unit)
			continue
		}
		if first == "" || unit < first {
			first = unit
		}
	}
	return first, first != ""
}
