// Package reclaim implements Rota's Reclaim scheduler plugin, the
// rota-scheduler profile's PostFilter in place of kube-scheduler's
// DefaultPreemption (docs/admission.md, "Guarantees, borrowing and
// reclaim").
//
// When a pod (or its whole gang) cannot be placed and its tenant's GPUQuota
// guarantee covers it, Reclaim frees GPUs that other tenants borrowed: it
// plans on the unblock advisor's snapshot (lowest priority first, then
// newest, gangs whole, never a GPU within the victim's tenant's own
// guarantee, the fewest GPUs disturbed, PodDisruptionBudgets respected),
// marks the model as being reclaimed (no pod may borrow it meanwhile) and
// hands the victims to a checkpoint-aware evictor, which asks each victim
// that declares a checkpoint to save its state before it is evicted
// through the Eviction API. A pod that no guarantee covers gets
// kube-scheduler's priority-based preemption, restricted to victims of its
// own tenant (namespace).
package reclaim
