package gpupool

import "sync"

// Limits are the tenants' per-model device limits as the Quota plugin was
// configured, shared through Caches so that the WaitReason plugin's unblock
// advice can say which limit change admits a pod without a second copy of
// the Quota args. Safe for concurrent use; the zero value holds none.
type Limits struct {
	mu     sync.RWMutex
	limits map[string]map[string]int
}

// Set replaces the limits: namespace to model to the most devices.
func (l *Limits) Set(limits map[string]map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limits = limits
}

// Get returns a copy of the limits; a namespace or model without an entry
// is unlimited.
func (l *Limits) Get() map[string]map[string]int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[string]map[string]int, len(l.limits))
	for ns, m := range l.limits {
		out[ns] = make(map[string]int, len(m))
		for k, v := range m {
			out[ns][k] = v
		}
	}
	return out
}
