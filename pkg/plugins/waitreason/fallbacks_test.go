package waitreason

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

func TestFallbacks(t *testing.T) {
	tiered := resourceapi.DeviceRequest{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "h100"}, {Name: "a100"}}}
	plain := resourceapi.DeviceRequest{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{}}
	claim := func(results ...string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{tiered, plain}}}}
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, r := range results {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: r})
		}
		return c
	}
	cases := map[string]struct {
		claim *resourceapi.ResourceClaim
		want  []bool
	}{
		"first tier":                  {claim: claim("gpu/h100", "nic"), want: []bool{false}},
		"fell back":                   {claim: claim("gpu/a100", "gpu/a100", "nic"), want: []bool{true}},
		"untiered requests not count": {claim: claim("nic")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fallbacks(tc.claim)); diff != "" {
				t.Errorf("fallbacks (-want +got):\n%s", diff)
			}
		})
	}
}
