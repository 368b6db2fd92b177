package gpupool

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
)

// ClaimsByDeviceIndex is the index the scheduler plugins add to the
// scheduler's ResourceClaim informer: a claim filed under each device its
// written allocation holds, by DeviceKey. The claims that hold a device are
// then found without listing every claim in the cluster.
const ClaimsByDeviceIndex = "rota-claims-by-device"

// DeviceKey is a device's key in ClaimsByDeviceIndex: "driver/pool/device".
func DeviceKey(id structured.DeviceID) string { return id.String() }

// ClaimDeviceKeys is the index function of ClaimsByDeviceIndex.
func ClaimDeviceKeys(obj any) ([]string, error) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return nil, fmt.Errorf("indexing claims by device: unexpected object %T", obj)
	}
	if c.Status.Allocation == nil {
		return nil, nil
	}
	keys := sets.New[string]()
	for _, r := range c.Status.Allocation.Devices.Results {
		keys.Insert(DeviceKey(structured.MakeDeviceID(r.Driver, r.Pool, r.Device)))
	}
	return sets.List(keys), nil
}

// AddClaimsByDeviceIndex adds ClaimsByDeviceIndex to the claim informer
// unless it has it: the plugins of a scheduler share the informer. Since
// client-go 0.30 an informer takes indexers after it started as well: the
// store is re-indexed under its lock.
func AddClaimsByDeviceIndex(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[ClaimsByDeviceIndex]; ok {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{ClaimsByDeviceIndex: ClaimDeviceKeys}); err != nil {
		return fmt.Errorf("adding the claims-by-device index: %w", err)
	}
	return nil
}
