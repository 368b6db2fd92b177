package reservation

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// checkArgs refuses a member whose containers tell vLLM to take more of
// each GPU than the member's budget: time-slicing caps nothing, so such a
// pod would take the memory of the reservation's other members. The
// budget is the smallest memoryMiB any of the pod's devices gets, against
// the smallest GPU the reservation holds; a pod that declares no memoryMiB
// is not checked.
func (pl *Reservation) checkArgs(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, res *rotav1.GPUReservation, member string, demand []requestDemand) *fwk.Status {
	var budget, total int64 = -1, -1
	for _, r := range demand {
		for _, t := range r.tiers {
			if t.declared && (budget < 0 || t.memoryMiB < budget) {
				budget = t.memoryMiB
			}
		}
	}
	for _, d := range res.Status.Devices {
		if d.MemoryMiB > 0 && (total < 0 || d.MemoryMiB < total) {
			total = d.MemoryMiB
		}
	}
	if budget < 0 || total < 0 {
		return nil
	}
	for _, u := range rsv.VLLMUses(pod) {
		// u/10000 of total > budget, in integers.
		if u.TenThousandths*total <= budget*10000 {
			continue
		}
		given := ""
		if !u.Given {
			given = " (vLLM's default: the flag is not given)"
		}
		fraction := gpuv1.MemoryFraction(budget, total)
		pl.metrics.refusals.WithLabelValues(ReasonArgsConflict).Inc()
		return unresolvable(ctx, cs, "", pod, ReasonArgsConflict,
			"container %s runs vLLM with --gpu-memory-utilization %s%s, %d MiB of the %d MiB GPU, but member %s of GPUReservation %s/%s may use %d MiB of it (memoryMiB), %s of the GPU; "+
				"give vLLM --gpu-memory-utilization %s or less (the driver sets $%s to it in the container) or raise memoryMiB",
			u.Container, u.Value, given, u.TenThousandths*total/10000, total, member, res.Namespace, res.Name, budget, fraction, fraction, gpuv1.EnvMemoryFraction)
	}
	return nil
}
