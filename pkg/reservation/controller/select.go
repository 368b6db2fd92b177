package controller

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Reasons for a reservation that holds nothing yet; each comes with a message
// that names the field and the numbers.
const (
	ReasonNodeNotFound      = "NodeNotFound"
	ReasonNoGPUs            = "NoGPUsPublished"
	ReasonTooManyGPUs       = "MoreGPUsThanNode"
	ReasonDeviceNotFound    = "DeviceNotFound"
	ReasonDeviceUnavailable = "DeviceUnavailable"
	ReasonInsufficientFree  = "InsufficientFreeGPUs"
	ReasonNameTooLong       = "NameTooLong"
)

// SelectionError says why no GPUs could be chosen; Reason is machine
// readable, Error() names the spec field.
type SelectionError struct {
	Reason  string
	Message string
}

func (e *SelectionError) Error() string { return e.Reason + ": " + e.Message }

// Select chooses the GPUs res holds among gpus (NodeGPUs of its node).
//
// GPUs already held stay held while the node still publishes them, so a
// reservation never moves under its members. Otherwise explicit UUIDs are
// taken as given (each must be on the node, healthy and free of other
// claims and reservations); a count takes the lowest-indexed GPUs that are
// healthy, unallocated and not reserved by another reservation. The same
// inventory always gives the same choice.
func Select(res *rotav1.GPUReservation, gpus []GPU) ([]GPU, error) {
	self := gpuv1.ReservedTaintValue(res.Namespace, res.Name)
	if errs := validation.IsValidLabelValue(self); len(errs) > 0 {
		return nil, &SelectionError{ReasonNameTooLong, fmt.Sprintf("metadata.name: the taint value %q (<namespace>.<name>) that marks the held GPUs must be a label value: %s",
			self, strings.Join(errs, "; "))}
	}
	if held := heldGPUs(res, gpus); held != nil {
		return held, nil
	}
	if len(gpus) == 0 {
		return nil, &SelectionError{ReasonNoGPUs, fmt.Sprintf("node %s publishes no GPUs of driver %s (spec.nodeName)", res.Spec.NodeName, gpuv1.DriverName)}
	}
	free := func(g GPU) string {
		switch {
		case !g.Healthy:
			return "unhealthy"
		case g.ReservedBy != "" && g.ReservedBy != self:
			return "reserved by " + g.ReservedBy
		case g.Allocated:
			return "allocated to a claim"
		}
		return ""
	}
	if len(res.Spec.DeviceUUIDs) > 0 {
		byUUID := map[string]GPU{}
		for _, g := range gpus {
			byUUID[g.UUID] = g
		}
		// A UUID the node does not publish is a mistake in the spec, which
		// no waiting mends; report it before any GPU that is merely busy.
		for i, u := range res.Spec.DeviceUUIDs {
			if _, ok := byUUID[u]; !ok {
				return nil, &SelectionError{ReasonDeviceNotFound, fmt.Sprintf("spec.deviceUUIDs[%d]: %s is not published on node %s", i, u, res.Spec.NodeName)}
			}
		}
		var out []GPU
		for i, u := range res.Spec.DeviceUUIDs {
			g := byUUID[u]
			if why := free(g); why != "" {
				return nil, &SelectionError{ReasonDeviceUnavailable, fmt.Sprintf("spec.deviceUUIDs[%d]: %s (%s) is %s", i, u, g.Device, why)}
			}
			out = append(out, g)
		}
		return out, nil
	}
	want := 1
	if res.Spec.Count != nil {
		want = int(*res.Spec.Count)
	}
	if want > len(gpus) {
		return nil, &SelectionError{ReasonTooManyGPUs, fmt.Sprintf("spec.count: %d GPUs asked, node %s has %d", want, res.Spec.NodeName, len(gpus))}
	}
	var out []GPU
	var busy []string
	for _, g := range gpus {
		if why := free(g); why != "" {
			busy = append(busy, g.Device+" "+why)
			continue
		}
		if len(out) < want {
			out = append(out, g)
		}
	}
	if len(out) < want {
		return nil, &SelectionError{ReasonInsufficientFree, fmt.Sprintf("spec.count: %d GPUs asked, node %s has %d free of %d (%s)",
			want, res.Spec.NodeName, len(out), len(gpus), strings.Join(busy, "; "))}
	}
	return out, nil
}

// heldGPUs are the GPUs of status.devices still published on the node, nil
// when the reservation holds none (or they all disappeared).
func heldGPUs(res *rotav1.GPUReservation, gpus []GPU) []GPU {
	if len(res.Status.Devices) == 0 {
		return nil
	}
	byKey := map[deviceKey]GPU{}
	for _, g := range gpus {
		byKey[deviceKey{g.Pool, g.Device}] = g
	}
	if n := len(res.Spec.DeviceUUIDs); n > 0 {
		want := map[string]bool{}
		for _, u := range res.Spec.DeviceUUIDs {
			want[u] = true
		}
		for _, d := range res.Status.Devices {
			if !want[d.UUID] {
				return nil
			}
		}
		if n != len(res.Status.Devices) {
			return nil
		}
	} else if res.Spec.Count != nil && int(*res.Spec.Count) != len(res.Status.Devices) {
		return nil
	}
	var out []GPU
	for _, d := range res.Status.Devices {
		g, ok := byKey[deviceKey{d.Pool, d.Device}]
		if !ok || g.UUID != d.UUID {
			// Still held: a GPU the driver stopped publishing is lost, not
			// released; the reservation reports it unhealthy.
			g = GPU{Pool: d.Pool, Device: d.Device, UUID: d.UUID, Model: d.Model, MemoryMiB: d.MemoryMiB}
		}
		out = append(out, g)
	}
	return out
}
