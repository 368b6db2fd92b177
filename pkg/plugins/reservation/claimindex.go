package reservation

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// Indexes the plugin adds to the scheduler's ResourceClaim informer, so
// that the VRAM budget of a reservation is summed from the claims that can
// hold its GPUs instead of from every claim in the cluster: gpupool's
// ClaimsByDeviceIndex, which files a claim under each device its written
// allocation holds, and claimsByToleranceIndex.
const (
	// claimsByToleranceIndex files a claim under each reservation it
	// tolerates (<namespace>.<name>, the taint's value), and under
	// toleratesAnyKey when a toleration matches every taint. The allocator
	// gives a reserved GPU only to such a claim, so these are the claims
	// whose allocation the informer may not show yet: pending in this
	// scheduler's Reserve, or assumed after the API call.
	claimsByToleranceIndex = "rota-reservation-claims-by-toleration"
)

// toleratesAnyKey is the claimsByToleranceIndex value of a claim with a
// wildcard toleration; no reservation's taint value has this form.
const toleratesAnyKey = "*"

// claimIndexers are the indexers of gpupool.ClaimsByDeviceIndex and
// claimsByToleranceIndex.
func claimIndexers() cache.Indexers {
	return cache.Indexers{gpupool.ClaimsByDeviceIndex: gpupool.ClaimDeviceKeys, claimsByToleranceIndex: claimTolerations}
}

func deviceKey(g rsv.HeldGPU) string {
	return gpupool.DeviceKey(structured.MakeDeviceID(gpuv1.DriverName, g.Pool, g.Device))
}

// claimTolerations is the index function of claimsByToleranceIndex. A
// claim's spec does not change, so neither do its entries.
func claimTolerations(obj any) ([]string, error) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return nil, fmt.Errorf("indexing claims by toleration: unexpected object %T", obj)
	}
	values, wildcard := rsv.ClaimTolerations(c)
	keys := sets.New(values...)
	if wildcard {
		keys.Insert(toleratesAnyKey)
	}
	return sets.List(keys), nil
}

// addClaimIndexers adds the plugin's indexes to the claim informer unless
// it has them (a second profile's plugin shares the informer). Since
// client-go 0.30 an informer takes indexers after it started as well: the
// store is re-indexed under its lock.
func addClaimIndexers(inf cache.SharedIndexInformer) error {
	have := inf.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, f := range claimIndexers() {
		if _, ok := have[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := inf.AddIndexers(missing); err != nil {
		return fmt.Errorf("adding the reservation claim indexes: %w", err)
	}
	return nil
}

// claimsNear returns the namespace/name keys of the claims that may hold
// one of res's GPUs: those whose written allocation holds one, and those
// that tolerate res (or every taint), whose allocation may be pending or
// assumed. It is a superset; the tracker's view of each decides.
func claimsNear(idx cache.Indexer, res *rotav1.GPUReservation, held map[rsv.HeldGPU]int64) ([]string, error) {
	keys := sets.New[string]()
	add := func(index, value string) error {
		k, err := idx.IndexKeys(index, value)
		if err != nil {
			return fmt.Errorf("claims by %s %q: %w", index, value, err)
		}
		keys.Insert(k...)
		return nil
	}
	for g := range held {
		if err := add(gpupool.ClaimsByDeviceIndex, deviceKey(g)); err != nil {
			return nil, err
		}
	}
	for _, v := range []string{gpuv1.ReservedTaintValue(res.Namespace, res.Name), toleratesAnyKey} {
		if err := add(claimsByToleranceIndex, v); err != nil {
			return nil, err
		}
	}
	return sets.List(keys), nil
}
