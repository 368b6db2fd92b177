package gpupool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// NewCELCache returns a cache for Matchers, with the CEL features the
// scheduler enables by default.
func NewCELCache() *cel.Cache {
	return cel.NewCache(64, DefaultCELFeatures())
}

// ErrNoClass is returned by NewMatcher when the tier's DeviceClass is missing.
var ErrNoClass = errors.New("device class not found")

// Matcher evaluates a tier's DeviceClass and request selectors with the
// DRA library's CEL support, the same compiled programs the allocator uses.
type Matcher struct {
	classExprs []string
	exprs      []string
	cache      *cel.Cache
	results    *MatchCache
}

// NewMatcher compiles the tier's class and request selectors. results, if
// not nil, remembers selector results across matchers and cycles.
func NewMatcher(classes structured.DeviceClassLister, cache *cel.Cache, results *MatchCache, t Tier) (*Matcher, error) {
	m := &Matcher{exprs: t.Selectors, cache: cache, results: results}
	class, err := classes.Get(t.Class)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrNoClass, t.Class, err)
	}
	for _, s := range class.Spec.Selectors {
		if s.CEL != nil {
			m.classExprs = append(m.classExprs, s.CEL.Expression)
		}
	}
	return m, nil
}

// Key identifies what the matcher accepts: its class's and its request's
// selectors. Two matchers with the same key accept the same devices.
func (m *Matcher) Key() string {
	return strings.Join(m.classExprs, "\x00") + "\x01" + strings.Join(m.exprs, "\x00")
}

// Matches reports whether the device satisfies every selector. A selector
// that cannot be compiled or evaluated on the device (missing attribute)
// does not match.
func (m *Matcher) Matches(ctx context.Context, d *Device) bool {
	failing, err := m.FirstFailing(ctx, d.ID.Driver.String(), d.Device)
	return err == nil && failing == ""
}

// ClassSelectorPrefix starts what FirstFailing returns for a device its
// class's selectors reject.
const ClassSelectorPrefix = "device class selector "

// FirstFailing returns "" when the device matches, else the expression
// (or class selector) that rejects it. Only a selector that does not
// compile is an error; one that cannot be evaluated on a device (say, a
// missing attribute) merely rejects it, the allocator reports such errors.
func (m *Matcher) FirstFailing(ctx context.Context, driver string, d *resourceapi.Device) (string, error) {
	for _, expr := range m.classExprs {
		if ok, err := m.eval(ctx, expr, driver, d); err != nil || !ok {
			return ClassSelectorPrefix + expr, err
		}
	}
	for _, expr := range m.exprs {
		if ok, err := m.eval(ctx, expr, driver, d); err != nil || !ok {
			return expr, err
		}
	}
	return "", nil
}

func (m *Matcher) eval(ctx context.Context, expr, driver string, d *resourceapi.Device) (bool, error) {
	key := matchKey{device: d, expr: expr}
	if matched, ok := m.results.get(key); ok {
		return matched, nil
	}
	prog := m.cache.GetOrCompile(expr)
	if prog.Error != nil {
		return false, fmt.Errorf("compile %q: %w", expr, prog.Error)
	}
	in := cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity}
	matched, _, err := prog.DeviceMatches(ctx, in)
	if err != nil {
		matched = false
	}
	m.results.put(key, matched)
	return matched, nil
}

// MatchCache remembers selector results per device object. The slice
// tracker hands out the same *Device until its slice changes, so a key can
// never go stale; the cache is simply emptied when it grows large. A nil
// cache remembers nothing.
type MatchCache struct {
	mu      sync.RWMutex
	results map[matchKey]bool
}

type matchKey struct {
	device *resourceapi.Device
	expr   string
}

const maxCachedMatches = 1 << 18

// NewMatchCache returns an empty cache.
func NewMatchCache() *MatchCache { return &MatchCache{results: map[matchKey]bool{}} }

func (c *MatchCache) get(k matchKey) (matched, ok bool) {
	if c == nil {
		return false, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	matched, ok = c.results[k]
	return matched, ok
}

func (c *MatchCache) put(k matchKey, matched bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.results) >= maxCachedMatches {
		clear(c.results)
	}
	c.results[k] = matched
}
