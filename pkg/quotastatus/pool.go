package quotastatus

import (
	resourceapi "k8s.io/api/resource/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/pkg/usage"
)

// PoolOf is what the accounting reads of the cluster, from listed objects:
//
//   - Healthy: per model, the GPUs of driver gpu.rota.dev (node-local
//     slices, with a model attribute) that the driver does not taint
//     unhealthy with an effect that keeps claims away;
//   - Used: per namespace and model, the GPUs its allocated claims hold,
//     each GPU once per namespace (pkg/usage's charge rule, without the
//     reservations: a reserved GPU nobody's claim holds is not used);
//   - Reserved: per namespace and model, the healthy GPUs its
//     GPUReservations hold, as their status lists them.
func PoolOf(slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim, reservations []*rotav1.GPUReservation) gpuquota.Pool {
	var ours []*resourceapi.ResourceSlice
	for _, s := range slices {
		if s.Spec.Driver == gpuv1.DriverName {
			ours = append(ours, s)
		}
	}
	p := gpuquota.Pool{Healthy: map[string]int{}, Used: map[string]map[string]int{}, Reserved: map[string]map[string]int{}}
	pool := gpupool.NewPool(ours, claims, nil)
	gpus := make([]usage.GPU, 0, len(pool.ByID))
	for _, d := range pool.Devices() {
		model := d.Model()
		if model == "" {
			continue
		}
		if d.Healthy() {
			p.Healthy[model]++
		}
		g := usage.GPU{Model: model}
		for _, a := range d.Allocations {
			g.Tenants = append(g.Tenants, a.Claim.Namespace)
		}
		gpus = append(gpus, g)
	}
	for k, h := range usage.Charge(gpus) {
		if h.Charged > 0 {
			add(p.Used, k.Namespace, k.Model, h.Charged)
		}
	}
	for _, r := range reservations {
		for _, d := range r.Status.Devices {
			if d.Healthy && d.Model != "" {
				add(p.Reserved, r.Namespace, d.Model, 1)
			}
		}
	}
	return p
}

func add(m map[string]map[string]int, namespace, model string, n int) {
	if m[namespace] == nil {
		m[namespace] = map[string]int{}
	}
	m[namespace][model] += n
}
