package gpupool

import "k8s.io/dynamic-resource-allocation/cel"

// Caches are what Rota's plugins keep between scheduling cycles. The
// scheduler binary gives every plugin the same Caches, so the slice index is
// rebuilt once when the slice list changes, a selector is compiled once and
// its result on a device is remembered once, whichever plugin asks first.
// Each field is safe for concurrent use.
type Caches struct {
	// Slices keeps the index of the published slices.
	Slices SliceCache
	// Matches remembers selector results per device.
	Matches *MatchCache
	// CEL holds the compiled selector programs; its features must be the
	// ones the scheduler's allocator uses, since results are shared.
	CEL *cel.Cache
	// Limits are the Quota plugin's tenant limits, for the unblock advice.
	Limits Limits
}

// DefaultCELFeatures are the CEL features of kube-scheduler's default
// feature gates that change what a Rota selector matches.
func DefaultCELFeatures() cel.Features { return cel.Features{EnableConsumableCapacity: true} }

// NewCaches returns empty caches whose selectors compile with features.
func NewCaches(features cel.Features) *Caches {
	return &Caches{Matches: NewMatchCache(), CEL: cel.NewCache(64, features)}
}

// CachesOrNew returns c, or new caches with DefaultCELFeatures when c is
// nil: a plugin built alone (in a test) keeps caches of its own.
func CachesOrNew(c *Caches) *Caches {
	if c == nil {
		return NewCaches(DefaultCELFeatures())
	}
	return c
}
