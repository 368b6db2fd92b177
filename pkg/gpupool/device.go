package gpupool

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Device is one device of a node-local ResourceSlice as the pool sees it.
type Device struct {
	ID        structured.DeviceID
	Node      string
	Device    *resourceapi.Device
	Allocated bool
	// Holders are the pods the device's claim is reserved for.
	Holders []types.NamespacedName
	// HolderClaim is the claim the device is allocated to, if any.
	HolderClaim types.NamespacedName
	// Consumed is what claims consume of a shared device's capacities.
	Consumed structured.ConsumedCapacity
	// Allocations are every allocation of the device, one per claim, in
	// the order the claims were given (a shared device has several).
	Allocations []Allocation
}

// Allocation is one claim's allocation of a device.
type Allocation struct {
	Claim types.NamespacedName
	// Pods are the pods the claim is reserved for.
	Pods []types.NamespacedName
	// ReservedFor are all the claim's consumers, pods or not.
	ReservedFor []resourceapi.ResourceClaimConsumerReference
	// Consumed is what the claim consumes of the device's capacities.
	Consumed map[resourceapi.QualifiedName]resource.Quantity
	// Shared is true when the device was allocated with a share ID.
	Shared bool
}

// Model is the device's model attribute ("H100"), or "" if it has none.
func (d *Device) Model() string {
	return StringAttribute(d.Device, d.ID.Driver.String(), gpuv1.AttributeModel)
}

// UUID is the device's uuid attribute, or "".
func (d *Device) UUID() string {
	return StringAttribute(d.Device, d.ID.Driver.String(), gpuv1.AttributeUUID)
}

// Healthy is false while the driver's unhealthy taint keeps claims away
// from the device (effect NoSchedule or NoExecute; the driver publishes
// a GPU it only warns about with effect None).
func (d *Device) Healthy() bool { return !Unhealthy(d.Device) }

// Unhealthy reports whether d carries the driver's unhealthy taint with an
// effect that keeps claims away.
func Unhealthy(d *resourceapi.Device) bool {
	for _, t := range d.Taints {
		if t.Key == gpuv1.UnhealthyTaintKey && t.Effect != resourceapi.DeviceTaintEffectNone {
			return true
		}
	}
	return false
}

// ReservedBy is the value of the device's rota.dev/reserved taint, the
// reservation holding it as "<namespace>.<name>" (docs/reservations.md),
// or "" when no reservation holds it.
func (d *Device) ReservedBy() string {
	return ReservedBy(d.Device)
}

// ReservedBy is the value of d's rota.dev/reserved taint, or "".
func ReservedBy(d *resourceapi.Device) string {
	for _, t := range d.Taints {
		if t.Key == gpuv1.ReservedTaintKey {
			return t.Value
		}
	}
	return ""
}

// BlockingTaint returns the first NoSchedule/NoExecute taint of d that the
// tolerations do not tolerate, or nil.
func BlockingTaint(d *resourceapi.Device, tolerations []resourceapi.DeviceToleration) *resourceapi.DeviceTaint {
	for i := range d.Taints {
		t := &d.Taints[i]
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		if !tolerates(tolerations, t) {
			return t
		}
	}
	return nil
}

// Blocked tells apart what keeps a claim with the tolerations off d. other
// is the first untolerated NoSchedule/NoExecute taint that is not a
// reservation's (the driver's unhealthy taint, an admin's), or nil;
// reservedBy is the value ("<namespace>.<name>") of an untolerated
// rota.dev/reserved taint, or "". A device both reserved and unhealthy has
// both; callers that must pick one name the unhealthy taint, because the
// GPU stays unusable until it heals, reservation or not.
func Blocked(d *resourceapi.Device, tolerations []resourceapi.DeviceToleration) (other *resourceapi.DeviceTaint, reservedBy string) {
	for i := range d.Taints {
		t := &d.Taints[i]
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		if tolerates(tolerations, t) {
			continue
		}
		switch {
		case t.Key == gpuv1.ReservedTaintKey && reservedBy == "":
			reservedBy = t.Value
		case t.Key != gpuv1.ReservedTaintKey && other == nil:
			other = t
		}
	}
	return other, reservedBy
}

func tolerates(tolerations []resourceapi.DeviceToleration, t *resourceapi.DeviceTaint) bool {
	for _, tol := range tolerations {
		if resourceclaim.ToleratesTaint(tol, *t) {
			return true
		}
	}
	return false
}

// StringAttribute reads an attribute by its bare or driver-qualified name.
func StringAttribute(d *resourceapi.Device, driver string, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	if a, ok := d.Attributes[resourceapi.QualifiedName(driver+"/"+string(name))]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// IntAttribute reads an integer attribute by its bare or driver-qualified
// name; ok is false when the device has none.
func IntAttribute(d *resourceapi.Device, driver string, name resourceapi.QualifiedName) (v int64, ok bool) {
	if a, ok := d.Attributes[name]; ok && a.IntValue != nil {
		return *a.IntValue, true
	}
	if a, ok := d.Attributes[resourceapi.QualifiedName(driver+"/"+string(name))]; ok && a.IntValue != nil {
		return *a.IntValue, true
	}
	return 0, false
}
