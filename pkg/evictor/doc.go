// Package evictor carries out the evictions of a reclaim (docs/admission.md,
// "Guarantees, borrowing and reclaim"): the Reclaim scheduler plugin hands
// it victims, pods whose GPUs go back to another tenant's guarantee, and it
// evicts each through the Eviction API after asking it to checkpoint when
// the pod declares how (the rota.dev/checkpoint annotation, ParseDeclaration).
//
// For each victim it records an Event on the pod that names the reclaiming
// tenant and the numbers behind the reclaim (Reclaiming), asks a declaring
// pod to checkpoint (the rota.dev/checkpoint-requested annotation, which a
// downward-API volume shows inside the pod, and an HTTP POST to the pod's
// declared port and path), waits for the acknowledgement (a 2xx answer to
// the POST, or the pod's rota.dev/checkpointed annotation set to the
// requested value) or the declared grace, records which happened (a
// Checkpoint Event and rota_reclaim_checkpoints_total), then evicts with the
// pod's UID as a precondition, retrying while a PodDisruptionBudget refuses
// (rota_reclaim_evictions_total, a Reclaimed or ReclaimBlocked Event). A pod
// without the declaration, or with one that does not parse, is evicted at
// once. Rota never execs into a pod: a workload that wants a signal turns
// the annotation into one with a sidecar.
//
// It imports only the API contract and client-go: the scheduler owns the
// decision, this package only carries it out and says how far it got
// (Evictor.InProgress, for `kubectl rota why`).
package evictor
