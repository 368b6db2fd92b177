// Package refusalmemo remembers refusals a scheduler plugin makes in
// Reserve, on what the allocator actually chose, so that Filter can repeat
// them in the next attempt while nothing they depend on has changed. A
// Reserve refusal is not seen by PostFilter plugins (WaitReason), and the
// same attempt would otherwise be retried in a loop; a Filter refusal is
// explained and retried only on the plugin's cluster events.
package refusalmemo

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/lru"
)

// kept bounds how many pods' refusals are remembered; a pod forgotten
// early is only tried once more.
const kept = 4096

// Memo maps a pod UID to its last Reserve refusal and the state it was
// made in (a fingerprint the plugin chooses). It is safe for concurrent
// use.
type Memo struct {
	cache     *lru.Cache
	activator Activator
}

// Activator is the part of the scheduler framework's handle that moves a
// pod to the active queue.
type Activator interface {
	Activate(logger klog.Logger, pods map[string]*v1.Pod)
}

type refusal struct {
	key, fingerprint, message string
}

// New returns an empty memo. With an activator, a refused pod is retried
// after its backoff rather than when a cluster event or the periodic flush
// moves it: a Reserve refusal follows no event of its own.
func New(a Activator) *Memo { return &Memo{cache: lru.New(kept), activator: a} }

// Add remembers that the pod was refused with message for key (a node, a
// reservation) in the state fingerprint, and has it retried soon, so that
// the next attempt's Filter repeats the refusal where it is explained.
func (m *Memo) Add(ctx context.Context, pod *v1.Pod, key, fingerprint, message string) {
	m.cache.Add(pod.UID, refusal{key: key, fingerprint: fingerprint, message: message})
	if m.activator != nil {
		// The pod is in flight: the queue records the activation and
		// requeues it after its backoff once this attempt fails.
		m.activator.Activate(klog.FromContext(ctx), map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
	}
}

// Get returns the message of the pod's refusal for key when it was made in
// the state fingerprint. A refusal for key made in another state is
// dropped: the pod may try again.
func (m *Memo) Get(uid types.UID, key, fingerprint string) (string, bool) {
	v, ok := m.cache.Get(uid)
	if !ok {
		return "", false
	}
	r, _ := v.(refusal)
	if r.key != key {
		return "", false
	}
	if r.fingerprint == fingerprint {
		return r.message, true
	}
	m.cache.Remove(uid)
	return "", false
}

// Forget drops the pod's refusal, once it is placed.
func (m *Memo) Forget(uid types.UID) { m.cache.Remove(uid) }
