package evictor

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Phase is where a victim's eviction stands.
type Phase string

const (
	// Queued: submitted, no worker has taken it yet.
	Queued Phase = "Queued"
	// Checkpointing: the pod was asked to checkpoint; Rota waits for the
	// acknowledgement or the grace (Status.Deadline).
	Checkpointing Phase = "Checkpointing"
	// Evicting: the Eviction is being sent, or retried while a
	// PodDisruptionBudget refuses it (Status.Refusals).
	Evicting Phase = "Evicting"
)

// Status is one victim in progress, for `kubectl rota why`.
type Status struct {
	Pod    types.NamespacedName
	UID    types.UID
	Tenant string
	For    Reclaimer
	Phase  Phase
	// Submitted is when the evictor took the victim.
	Submitted time.Time
	// Requested is when Rota asked the pod to checkpoint and Deadline when
	// its grace ends; both zero when the pod declares no checkpoint.
	Requested, Deadline time.Time
	// NotifyError is why the checkpoint POST failed ("" while there is
	// none, or none failed); Rota then waits for the annotation.
	NotifyError string
	// Refusals counts the evictions a PodDisruptionBudget refused so far.
	Refusals int
}

// GraceLeft is how long the checkpoint grace has left at now (0 when it
// has ended or there is none).
func (s Status) GraceLeft(now time.Time) time.Duration {
	if s.Deadline.IsZero() || !now.Before(s.Deadline) {
		return 0
	}
	return s.Deadline.Sub(now)
}
