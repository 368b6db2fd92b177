package gpupool

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// ReservedByRules maps each device a reservation's DeviceTaintRule taints
// rota.dev/reserved to the taint's value, the reservation as
// "<namespace>.<name>" (docs/reservations.md). It answers what
// Device.ReservedBy answers for slices read without the rules applied, as
// the reservation controller reads them. A rule that names no driver
// applies to driver's devices; rules that select no single device are
// not a reservation's.
func ReservedByRules(rules []*resourceapi.DeviceTaintRule, driver string) map[structured.DeviceID]string {
	out := map[structured.DeviceID]string{}
	for _, r := range rules {
		sel := r.Spec.DeviceSelector
		if r.Spec.Taint.Key != gpuv1.ReservedTaintKey || sel == nil || sel.Pool == nil || sel.Device == nil {
			continue
		}
		if sel.Driver != nil && *sel.Driver != driver {
			continue
		}
		out[structured.MakeDeviceID(driver, *sel.Pool, *sel.Device)] = r.Spec.Taint.Value
	}
	return out
}
