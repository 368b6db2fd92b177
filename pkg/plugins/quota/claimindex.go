package quota

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// claimReader is the part of the scheduler's DRA claim tracker the plugin
// reads a tenant's claims through: the assumed object where the scheduler
// wrote an allocation the informer has not shown yet, the pending
// allocation of a claim between Reserve and PreBind.
type claimReader interface {
	Get(namespace, name string) (*resourceapi.ResourceClaim, error)
	GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult
}

// tenantClaims finds a namespace's claims through the namespace index of
// the scheduler's shared ResourceClaim informer and reads each through the
// claim tracker, so that the cost of a tenant's usage grows with the
// tenant's own claims, not with the cluster's. The tracker's assume cache
// is fed by that informer, so every claim it holds is in the index.
type tenantClaims struct {
	index  cache.Indexer
	claims claimReader
}

// namespaceIndexers is the index tenantClaims reads. The generated
// informers carry it; it is added when the informer was built without.
func namespaceIndexers() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}

// newTenantClaims reads claims through inf's store, adding the namespace
// index unless it has it (client-go re-indexes a started informer's store).
func newTenantClaims(inf cache.SharedIndexInformer, claims claimReader) (*tenantClaims, error) {
	if _, ok := inf.GetIndexer().GetIndexers()[cache.NamespaceIndex]; !ok {
		if err := inf.AddIndexers(namespaceIndexers()); err != nil {
			return nil, fmt.Errorf("adding the claim namespace index: %w", err)
		}
	}
	return &tenantClaims{index: inf.GetIndexer(), claims: claims}, nil
}

// list returns namespace's claims as the tracker sees them. A claim the
// informer holds but the tracker no longer does (deleted meanwhile) is
// left out, as a listing of the tracker would.
func (t *tenantClaims) list(namespace string) ([]*resourceapi.ResourceClaim, error) {
	keys, err := t.index.IndexKeys(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, fmt.Errorf("claims of namespace %q: %w", namespace, err)
	}
	out := make([]*resourceapi.ResourceClaim, 0, len(keys))
	for _, key := range keys {
		_, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			continue
		}
		c, err := t.claims.Get(namespace, name)
		if err != nil {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}
