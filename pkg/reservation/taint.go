package reservation

import (
	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Toleration is what a member's claim request carries to reach the GPUs of
// the reservation namespace/name.
func Toleration(namespace, name string) resourceapi.DeviceToleration {
	return resourceapi.DeviceToleration{
		Key:      gpuv1.ReservedTaintKey,
		Operator: resourceapi.DeviceTolerationOpEqual,
		Value:    gpuv1.ReservedTaintValue(namespace, name),
		Effect:   resourceapi.DeviceTaintEffectNoSchedule,
	}
}

// TolerationsOf lists the reservations (as gpuv1.ReservedTaintValue) a request's
// tolerations reach. wildcard is true when a toleration matches every
// reservation (operator Exists on the key, or an empty key).
func TolerationsOf(tols []resourceapi.DeviceToleration) (values []string, wildcard bool) {
	for _, t := range tols {
		if t.Effect != "" && t.Effect != resourceapi.DeviceTaintEffectNoSchedule {
			continue
		}
		switch {
		case t.Key == "" && t.Operator == resourceapi.DeviceTolerationOpExists:
			wildcard = true
		case t.Key == gpuv1.ReservedTaintKey && t.Operator == resourceapi.DeviceTolerationOpExists:
			wildcard = true
		case t.Key == gpuv1.ReservedTaintKey:
			values = append(values, t.Value)
		}
	}
	return values, wildcard
}

// ClaimTolerations collects TolerationsOf over every request and subrequest
// of a claim.
func ClaimTolerations(claim *resourceapi.ResourceClaim) (values []string, wildcard bool) {
	add := func(tols []resourceapi.DeviceToleration) {
		v, w := TolerationsOf(tols)
		values = append(values, v...)
		wildcard = wildcard || w
	}
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil {
			add(r.Exactly.Tolerations)
		}
		for _, s := range r.FirstAvailable {
			add(s.Tolerations)
		}
	}
	return values, wildcard
}
