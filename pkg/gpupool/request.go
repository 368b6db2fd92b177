package gpupool

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"
)

// Tier is one way to satisfy a request: a subrequest of a firstAvailable
// list, or the request itself.
type Tier struct {
	Name        string
	Class       string
	Selectors   []string
	Count       int64
	All         bool
	Tolerations []resourceapi.DeviceToleration
	// Capacity is what the tier requests of each capacity of a shared
	// device (capacity.requests).
	Capacity map[resourceapi.QualifiedName]resource.Quantity
}

// Request is one request of one of the pod's unallocated claims.
type Request struct {
	Claim *resourceapi.ResourceClaim
	Name  string
	Tiers []Tier
	// Tiered is true for firstAvailable requests.
	Tiered bool
}

// PodRequests returns the requests of the pod's claims that still need an
// allocation. Claims not created yet are reported as an error.
func PodRequests(dra fwk.SharedDRAManager, pod *v1.Pod) ([]Request, error) {
	var out []Request
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, fmt.Errorf("claim %q: %w", pod.Spec.ResourceClaims[i].Name, err)
		}
		if name == nil {
			continue
		}
		claim, err := dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			return nil, fmt.Errorf("claim %s/%s: %w", pod.Namespace, *name, err)
		}
		if claim.Status.Allocation != nil {
			continue
		}
		out = append(out, ClaimRequests(claim)...)
	}
	return out, nil
}

// Ref names tier i of r as allocation results do: "<request>/<subrequest>"
// for a firstAvailable request, the request's name otherwise.
func (r *Request) Ref(i int) string {
	if !r.Tiered {
		return r.Name
	}
	return r.Name + "/" + r.Tiers[i].Name
}

// TieredRequests returns the firstAvailable requests of one claim.
func TieredRequests(claim *resourceapi.ResourceClaim) []Request {
	var out []Request
	for _, r := range ClaimRequests(claim) {
		if r.Tiered {
			out = append(out, r)
		}
	}
	return out
}

// ClaimRequests returns the requests of one claim with their tiers.
func ClaimRequests(claim *resourceapi.ResourceClaim) []Request {
	var out []Request
	for _, req := range claim.Spec.Devices.Requests {
		r := Request{Claim: claim, Name: req.Name}
		switch {
		case req.Exactly != nil:
			r.Tiers = []Tier{tierOf(req.Name, req.Exactly.DeviceClassName, req.Exactly.Selectors, req.Exactly.AllocationMode, req.Exactly.Count, req.Exactly.Tolerations, req.Exactly.Capacity)}
		case len(req.FirstAvailable) > 0:
			r.Tiered = true
			for _, sub := range req.FirstAvailable {
				r.Tiers = append(r.Tiers, tierOf(sub.Name, sub.DeviceClassName, sub.Selectors, sub.AllocationMode, sub.Count, sub.Tolerations, sub.Capacity))
			}
		default:
			continue
		}
		out = append(out, r)
	}
	return out
}

func tierOf(name, class string, sels []resourceapi.DeviceSelector, mode resourceapi.DeviceAllocationMode, count int64, tol []resourceapi.DeviceToleration, capacity *resourceapi.CapacityRequirements) Tier {
	t := Tier{Name: name, Class: class, Count: count, All: mode == resourceapi.DeviceAllocationModeAll, Tolerations: tol}
	if capacity != nil {
		t.Capacity = capacity.Requests
	}
	if t.Count == 0 {
		t.Count = 1
	}
	for _, s := range sels {
		if s.CEL != nil {
			t.Selectors = append(t.Selectors, s.CEL.Expression)
		}
	}
	return t
}
