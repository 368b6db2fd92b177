package reservation

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
)

// refusalsKept bounds how many pods' refusals are remembered; a pod
// forgotten early is only tried once more.
const refusalsKept = 4096

// refusals remembers, per pod UID, why Reserve refused the devices the
// allocator chose and what the state was then (a fingerprint). While the
// state is the same the allocator would choose the same devices, so Filter
// refuses the pod with the same message instead, where the WaitReason
// plugin sees and explains it.
type refusals struct {
	cache *lru.Cache // thread-safe
}

type refusal struct {
	fingerprint string
	message     string
}

func newRefusals() *refusals { return &refusals{cache: lru.New(refusalsKept)} }

func (r *refusals) add(uid types.UID, fingerprint, message string) {
	r.cache.Add(uid, refusal{fingerprint: fingerprint, message: message})
}

// get returns the message of the pod's refusal when it was made in the
// state fingerprint; a refusal made in another state is dropped.
func (r *refusals) get(uid types.UID, fingerprint string) (string, bool) {
	v, ok := r.cache.Get(uid)
	if !ok {
		return "", false
	}
	if f, _ := v.(refusal); f.fingerprint == fingerprint {
		return f.message, true
	}
	r.cache.Remove(uid)
	return "", false
}

func (r *refusals) forget(uid types.UID) { r.cache.Remove(uid) }
