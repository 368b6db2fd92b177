package quota

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// A tenant's usage counts its own claims as the DRA tracker sees them: an
// allocation the scheduler wrote (assumed) counts before the informer shows
// it, a claim the tracker no longer has does not count, and other
// namespaces' claims are not read.
func TestUsageReadsTheNamespaceThroughTheTracker(t *testing.T) {
	tracker := &benchTracker{claims: map[string]*resourceapi.ResourceClaim{}, pending: map[types.UID]*resourceapi.AllocationResult{}}
	index := cache.NewIndexer(cache.MetaNamespaceKeyFunc, namespaceIndexers())
	informed := func(c *resourceapi.ResourceClaim) {
		if err := index.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	// Written and shown by the informer.
	done := benchClaim("team-a", "done")
	done.Status.Allocation = benchAllocation("n0", "gpu-0")
	informed(done)
	tracker.claims["team-a/done"] = done
	// Assumed: the informer still shows it unallocated.
	assumed := benchClaim("team-a", "assumed")
	informed(assumed)
	withAlloc := assumed.DeepCopy()
	withAlloc.Status.Allocation = benchAllocation("n0", "gpu-1")
	tracker.claims["team-a/assumed"] = withAlloc
	// Deleted: the informer has not caught up, the tracker has.
	gone := benchClaim("team-a", "gone")
	gone.Status.Allocation = benchAllocation("n0", "gpu-2")
	informed(gone)
	// Another tenant's claim, in the tracker only as far as this test goes.
	other := benchClaim("team-b", "other")
	other.Status.Allocation = benchAllocation("n0", "gpu-3")
	informed(other)
	tracker.claims["team-b/other"] = other

	args := &QuotaArgs{ModelAttribute: DefaultModelAttribute}
	pl := &Quota{args: args, claims: &tenantClaims{index: index, claims: tracker}, inFlight: map[types.UID]charge{}}
	inv := &gpupool.Inventory{Slices: gpupool.NewSlices([]*resourceapi.ResourceSlice{benchSlice("n0", 8)})}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	use, err := pl.usageLocked("team-a", inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{"H100": 2}, use); diff != "" {
		t.Errorf("usage of team-a (-want +got):\n%s", diff)
	}
	claims, err := pl.claims.list("team-b")
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].Name != "other" {
		t.Errorf("claims of team-b = %v, want [other]", claims)
	}
}
