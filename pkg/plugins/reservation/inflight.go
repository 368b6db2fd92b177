package reservation

import (
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// inflightClaims are the claims this scheduler allocated in Reserve whose
// allocation the claim informer does not show yet: pending until PreBind
// writes it, then assumed until the informer receives the write. The claim
// index finds such a claim by its toleration; these are the others, a claim
// the allocator gave a reserved GPU whose taint was not in effect yet. They
// leave when the informer shows the claim allocated (the device index has
// it then) or deleted, or when the pod is unreserved. Their number is that
// of the pods being bound, not of the claims in the cluster.
type inflightClaims struct {
	mu   sync.Mutex
	keys map[types.UID]string // namespace/name
}

func (f *inflightClaims) add(uid types.UID, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[types.UID]string{}
	}
	f.keys[uid] = key
}

func (f *inflightClaims) remove(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.keys, uid)
}

// list returns the claims' namespace/name keys.
func (f *inflightClaims) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.keys))
	for _, k := range f.keys {
		out = append(out, k)
	}
	return out
}

// handler forgets a claim once the informer shows it allocated or deleted.
func (f *inflightClaims) handler() cache.ResourceEventHandler {
	forget := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if c, ok := obj.(*resourceapi.ResourceClaim); ok {
			f.remove(c.UID)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if c, ok := obj.(*resourceapi.ResourceClaim); ok && c.Status.Allocation != nil {
				f.remove(c.UID)
			}
		},
		DeleteFunc: forget,
	}
}
