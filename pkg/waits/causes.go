package waits

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Causes keeps, per pod, the cause of its latest wait as the WaitReason
// plugin classified it, for the scheduler's other plugins (Fairness skips
// pods that free devices would not help). It lives in the scheduler's
// memory and not only on the pod: the rota.dev/wait-detail annotation says
// the same for users, but a tenant can rewrite its pods' annotations, so
// no plugin decides from it. After a restart a pod has no cause until its
// next attempt is classified. Safe for concurrent use.
type Causes struct {
	mu     sync.RWMutex
	causes map[types.UID]Cause
}

// NewCauses returns an empty record.
func NewCauses() *Causes { return &Causes{causes: map[types.UID]Cause{}} }

// CausesOrNew returns c, or a new record when c is nil: a plugin built
// alone (in a test) keeps a record of its own.
func CausesOrNew(c *Causes) *Causes {
	if c == nil {
		return NewCauses()
	}
	return c
}

// Set records the cause of pod's latest wait; "" (a plain wait for
// capacity) forgets it.
func (c *Causes) Set(pod types.UID, cause Cause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cause == "" {
		delete(c.causes, pod)
		return
	}
	c.causes[pod] = cause
}

// Of returns the cause of pod's latest wait, "" when none is known.
func (c *Causes) Of(pod types.UID) Cause {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.causes[pod]
}

// Forget drops what is known of pod (placed or deleted).
func (c *Causes) Forget(pod types.UID) { c.Set(pod, "") }
