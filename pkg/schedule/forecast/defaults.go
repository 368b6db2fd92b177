package forecast

import (
	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// defaulted returns the demands with the API server's defaults for device
// requests set (allocation mode ExactCount, count 1), as a claim template
// read from a file lacks them and the allocator refuses an empty mode.
func defaulted(in []preview.Demand) []preview.Demand {
	out := make([]preview.Demand, len(in))
	for i, d := range in {
		out[i] = preview.Demand{Pods: d.Pods, PodClaims: make([]resourceapi.ResourceClaimSpec, len(d.PodClaims))}
		for j := range d.PodClaims {
			spec := d.PodClaims[j].DeepCopy()
			for k := range spec.Devices.Requests {
				req := &spec.Devices.Requests[k]
				if req.Exactly != nil {
					defaultCount(&req.Exactly.AllocationMode, &req.Exactly.Count)
				}
				for s := range req.FirstAvailable {
					defaultCount(&req.FirstAvailable[s].AllocationMode, &req.FirstAvailable[s].Count)
				}
			}
			out[i].PodClaims[j] = *spec
		}
	}
	return out
}

func defaultCount(mode *resourceapi.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourceapi.DeviceAllocationModeExactCount
	}
	if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}
