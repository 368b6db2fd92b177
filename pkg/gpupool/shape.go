package gpupool

import resourceapi "k8s.io/api/resource/v1"

// SimpleClaimShape reports whether a pod's unallocated claims have the
// shape nearly every tiered pod has, whose allocation on a plain node
// (Plain) is fully determined by counting: one claim with one
// firstAvailable request, every subrequest ExactCount without capacity
// requests, and no constraints. The allocator walks the subrequests in
// order and takes the first whose class and selectors accept at least
// Count of the node's free devices that no untolerated taint blocks.
func SimpleClaimShape(claims []*resourceapi.ResourceClaim) bool {
	req, ok := oneRequest(claims)
	if !ok || req.Exactly != nil || len(req.FirstAvailable) == 0 {
		return false
	}
	for _, sub := range req.FirstAvailable {
		if sub.AllocationMode != resourceapi.DeviceAllocationModeExactCount || sub.Capacity != nil {
			return false
		}
	}
	return true
}

// CountableClaimShape is SimpleClaimShape, or one claim with one exact
// ExactCount request without capacity requests and no constraints: a
// single tier, decided by counting the same way.
func CountableClaimShape(claims []*resourceapi.ResourceClaim) bool {
	if SimpleClaimShape(claims) {
		return true
	}
	req, ok := oneRequest(claims)
	return ok && req.Exactly != nil && len(req.FirstAvailable) == 0 &&
		req.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount && req.Exactly.Capacity == nil
}

// oneRequest is the one request of the one claim, without constraints.
func oneRequest(claims []*resourceapi.ResourceClaim) (resourceapi.DeviceRequest, bool) {
	if len(claims) != 1 {
		return resourceapi.DeviceRequest{}, false
	}
	spec := claims[0].Spec.Devices
	if len(spec.Constraints) != 0 || len(spec.Requests) != 1 {
		return resourceapi.DeviceRequest{}, false
	}
	return spec.Requests[0], true
}
