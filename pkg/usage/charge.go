// Package usage accounts GPU use per tenant (namespace) and model: what
// each tenant holds now (the charge rule, shared by the usage meter and
// `kubectl rota pool`'s tenant summary) and, integrated over an injected
// clock, reservation-hours and GPU-hours as Prometheus counters
// (docs/reservations.md, "Usage accounting").
package usage

import (
	"sort"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// GPU is what the charge rule needs to know of one GPU.
type GPU struct {
	Model string
	// ReservedBy is the namespace of the GPUReservation holding the GPU,
	// "" when none does.
	ReservedBy string
	// ReservationPhase is that reservation's phase; "" when unknown (it is
	// then charged).
	ReservationPhase rotav1.ReservationPhase
	// Tenants are the namespaces whose claims are allocated the GPU.
	Tenants []string
}

// Key is a tenant and a GPU model.
type Key struct {
	Namespace string `json:"namespace"`
	Model     string `json:"model"`
}

// Holding is what a tenant holds of one model at an instant.
type Holding struct {
	// Reserved: GPUs its GPUReservations hold and are charged for, used or
	// not (not while a reservation is Degraded or Releasing: Charges).
	Reserved int `json:"reserved"`
	// Charged: GPUs charged to it, each once: the reserved ones, plus every
	// other GPU its claims are allocated. A member's claim on its own
	// reservation's GPU adds nothing; a GPU time-sliced between claims of
	// one tenant counts once for it. The GPUs of a reservation that is not
	// charged count as any other GPU: once for each tenant whose claims
	// hold them.
	Charged int `json:"charged"`
}

// Charges reports whether a reservation in phase is charged for the GPUs
// it holds: not while Degraded (a held GPU is unhealthy or gone, so the
// tenant does not get what it reserved) nor while Releasing.
func Charges(phase rotav1.ReservationPhase) bool {
	return phase != rotav1.ReservationDegraded && phase != rotav1.ReservationReleasing
}

// Charge applies the charge rule to every GPU of the pool.
func Charge(gpus []GPU) map[Key]Holding {
	out := map[Key]Holding{}
	for _, g := range gpus {
		charged := map[string]bool{}
		if g.ReservedBy != "" && Charges(g.ReservationPhase) {
			k := Key{Namespace: g.ReservedBy, Model: g.Model}
			h := out[k]
			h.Reserved++
			out[k] = h
			charged[g.ReservedBy] = true
		}
		for _, ns := range g.Tenants {
			charged[ns] = true
		}
		for ns := range charged {
			k := Key{Namespace: ns, Model: g.Model}
			h := out[k]
			h.Charged++
			out[k] = h
		}
	}
	return out
}

// Keys lists the keys of h sorted by namespace, then model.
func Keys(h map[Key]Holding) []Key {
	keys := make([]Key, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].Model < keys[j].Model
	})
	return keys
}
