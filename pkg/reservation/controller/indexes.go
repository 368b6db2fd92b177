package controller

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// The controller's indexes on the shared informers, so that a sync reads
// what concerns its reservation's node instead of every slice, claim and
// DeviceTaintRule of the cluster, and an event wakes only the reservations
// it concerns. The names are the controller's own: other controllers of the
// binary share the informers.
const (
	// indexReservationByNode: GPUReservations by spec.nodeName.
	indexReservationByNode = "reservation-controller.reservation-by-node"
	// indexSliceByNode and indexSliceByPool: ResourceSlices by node and by
	// pool name.
	indexSliceByNode = "reservation-controller.slice-by-node"
	indexSliceByPool = "reservation-controller.slice-by-pool"
	// indexClaimByDevice: allocated ResourceClaims by each gpu.rota.dev
	// device they hold (deviceIndexKey).
	indexClaimByDevice = "reservation-controller.claim-by-device"
	// indexRuleByDevice: DeviceTaintRules by the device they select
	// (deviceIndexKey; any driver, as gpupool.ReservedByRules reads them).
	indexRuleByDevice = "reservation-controller.rule-by-device"
	// indexRuleByReservation: DeviceTaintRules by the reservation
	// (<namespace>/<name>) their labels name.
	indexRuleByReservation = "reservation-controller.rule-by-reservation"
)

// deviceIndexKey is a device's key in the by-device indexes.
func deviceIndexKey(pool, device string) string { return pool + "/" + device }

// addIndexes registers the controller's indexes on its informers.
func addIndexes(inf Informers) error {
	for _, ix := range []struct {
		informer cache.SharedIndexInformer
		indexers cache.Indexers
	}{
		{inf.Reservations.Informer(), cache.Indexers{indexReservationByNode: reservationNode}},
		{inf.Slices.Informer(), cache.Indexers{indexSliceByNode: sliceNode, indexSliceByPool: slicePool}},
		{inf.Claims.Informer(), cache.Indexers{indexClaimByDevice: claimDevices}},
		{inf.Rules.Informer(), cache.Indexers{indexRuleByDevice: ruleDevice, indexRuleByReservation: ruleReservation}},
	} {
		if err := ix.informer.AddIndexers(ix.indexers); err != nil {
			return fmt.Errorf("adding indexes: %w", err)
		}
	}
	return nil
}

func reservationNode(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	node, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
	if node == "" {
		return nil, nil
	}
	return []string{node}, nil
}

func sliceNode(obj any) ([]string, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || s.Spec.NodeName == nil {
		return nil, nil
	}
	return []string{*s.Spec.NodeName}, nil
}

func slicePool(obj any) ([]string, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return nil, nil
	}
	return []string{s.Spec.Pool.Name}, nil
}

func claimDevices(obj any) ([]string, error) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok || c.Status.Allocation == nil {
		return nil, nil
	}
	var keys []string
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == gpuv1.DriverName {
			keys = append(keys, deviceIndexKey(r.Pool, r.Device))
		}
	}
	return keys, nil
}

func ruleDevice(obj any) ([]string, error) {
	r, ok := obj.(*resourceapi.DeviceTaintRule)
	if !ok || r.Spec.DeviceSelector == nil || r.Spec.DeviceSelector.Pool == nil || r.Spec.DeviceSelector.Device == nil {
		return nil, nil
	}
	return []string{deviceIndexKey(*r.Spec.DeviceSelector.Pool, *r.Spec.DeviceSelector.Device)}, nil
}

func ruleReservation(obj any) ([]string, error) {
	r, ok := obj.(*resourceapi.DeviceTaintRule)
	if !ok {
		return nil, nil
	}
	ns, okNS := r.Labels[gpuv1.ReservationNamespaceLabel]
	name, okName := r.Labels[gpuv1.ReservationNameLabel]
	if !okNS || !okName {
		return nil, nil
	}
	return []string{ns + "/" + name}, nil
}

// byIndex lists an informer's objects of one index value as T, skipping
// objects of another type.
func byIndex[T any](indexer cache.Indexer, index, value string) ([]T, error) {
	objs, err := indexer.ByIndex(index, value)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", index, err)
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// nodeInventory is what choose reads for one node: its slices, the claims
// allocated on their gpu.rota.dev devices and the rules selecting their
// devices — what NodeGPUs reads of the whole cluster, no more.
func (c *Controller) nodeInventory(node string) ([]*resourceapi.ResourceSlice, []*resourceapi.ResourceClaim, []*resourceapi.DeviceTaintRule, error) {
	local, err := byIndex[*resourceapi.ResourceSlice](c.sliceIndex, indexSliceByNode, node)
	if err != nil {
		return nil, nil, nil, err
	}
	var claims []*resourceapi.ResourceClaim
	var rules []*resourceapi.DeviceTaintRule
	seen := map[*resourceapi.ResourceClaim]bool{}
	for _, s := range local {
		for _, d := range s.Spec.Devices {
			key := deviceIndexKey(s.Spec.Pool.Name, d.Name)
			if s.Spec.Driver == gpuv1.DriverName {
				cs, err := byIndex[*resourceapi.ResourceClaim](c.claimIndex, indexClaimByDevice, key)
				if err != nil {
					return nil, nil, nil, err
				}
				for _, cl := range cs {
					if !seen[cl] {
						seen[cl] = true
						claims = append(claims, cl)
					}
				}
			}
			rs, err := byIndex[*resourceapi.DeviceTaintRule](c.ruleIndex, indexRuleByDevice, key)
			if err != nil {
				return nil, nil, nil, err
			}
			rules = append(rules, rs...)
		}
	}
	return local, claims, rules, nil
}

// enqueueByIndex enqueues the reservations of one index value.
func (c *Controller) enqueueByIndex(index, value string) {
	objs, err := c.reservationIndex.ByIndex(index, value)
	if err != nil {
		return
	}
	for _, o := range objs {
		if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			c.queue.Add(key)
		}
	}
}
