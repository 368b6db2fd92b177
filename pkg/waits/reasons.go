// Package waits holds what Rota says about a pod that waits: the
// machine-readable reason codes, the pod condition that carries them, the
// pure classification of a failed attempt, and a small asynchronous writer
// of the condition and its Event. Scheduler plugins and kubectl-rota share it.
package waits

import (
	v1 "k8s.io/api/core/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Reason is one machine-readable answer to "why does this pod wait?".
type Reason string

// The reasons of docs/admission.md, "Reasons". Every waiting pod carries exactly one.
const (
	// QuotaExceeded: the tenant is at its limit for the device model the
	// pod would be granted (and no tier within the limit is free).
	QuotaExceeded Reason = "QuotaExceeded"
	// InsufficientCapacity: fewer free matching devices in the whole pool
	// than the pod needs.
	InsufficientCapacity Reason = "InsufficientCapacity"
	// TopologyFragmentation: enough free matching devices in the pool, but
	// no single placement satisfies the constraint (e.g. same node).
	TopologyFragmentation Reason = "TopologyFragmentation"
	// GangIncomplete: the pod's gang cannot be admitted whole yet.
	GangIncomplete Reason = "GangIncomplete"
	// ReservationOvercommitted: a GPUReservation's VRAM budget would be
	// exceeded.
	ReservationOvercommitted Reason = "ReservationOvercommitted"
	// Unhealthy: enough matching devices exist, but some of those needed
	// are tainted unhealthy.
	Unhealthy Reason = "Unhealthy"
	// Reserved: enough matching devices exist, but some of those needed
	// are held by a GPUReservation the pod is not a member of.
	Reserved Reason = "Reserved"
	// NotAttempted: still queued; no scheduling attempt yet.
	NotAttempted Reason = "NotAttempted"
	// StartFailed: the pod is placed, but its node cannot start it with
	// its GPUs: the kubelet could not prepare its claims (the DRA driver's
	// NodePrepareResources failed) or the container runtime could not inject
	// the CDI devices the driver returned (started.go).
	StartFailed Reason = "StartFailed"
	// BindingFailed: the scheduler chose a node, but the placement was
	// undone before the pod was bound, for a cause no Rota plugin recorded
	// (an API error writing a claim or the binding, a claim the namespace's
	// ResourceQuota refuses, a Permit timeout); the PodScheduled condition
	// carries the error, and the pod is retried after its backoff.
	BindingFailed Reason = "BindingFailed"
)

// Placed is the condition reason once the pod is bound (status False).
const Placed = "Placed"

// AllReasons lists the reasons in a stable order, for metrics and docs.
var AllReasons = []Reason{QuotaExceeded, InsufficientCapacity, TopologyFragmentation, GangIncomplete, ReservationOvercommitted, Reserved, Unhealthy, NotAttempted, StartFailed, BindingFailed}

// Current returns the pod's rota.dev/Waiting condition, or nil.
func Current(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == gpuv1.WaitingCondition {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
