package reservation

import (
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// TaintValue is "<namespace>.<name>": a label value naming the reservation.
// Namespaces cannot contain dots, so the namespace part is unambiguous; the
// admission policy in manifests/admission relies on that.
func TaintValue(namespace, name string) string { return namespace + "." + name }

// ParseTaintValue splits a TaintValue; ok is false for a malformed value.
func ParseTaintValue(v string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(v, ".")
	if !ok || namespace == "" || name == "" {
		return "", "", false
	}
	return namespace, name, true
}

// Toleration is what a member's claim request carries to reach the GPUs of
// the reservation namespace/name.
func Toleration(namespace, name string) resourceapi.DeviceToleration {
	return resourceapi.DeviceToleration{
		Key:      gpuv1.ReservedTaintKey,
		Operator: resourceapi.DeviceTolerationOpEqual,
		Value:    TaintValue(namespace, name),
		Effect:   resourceapi.DeviceTaintEffectNoSchedule,
	}
}

// TolerationsOf lists the reservations (as TaintValue) a request's
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
