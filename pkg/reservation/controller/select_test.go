package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// slice publishes n H200s named gpu-0... on node n1; unhealthy indexes get
// the driver's taint.
func slice(n int, unhealthy ...int) *resourceapi.ResourceSlice {
	bad := map[int]bool{}
	for _, i := range unhealthy {
		bad[i] = true
	}
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: gpuv1.DriverName, NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1"},
	}}
	for i := range n {
		d := resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"uuid":  {StringValue: ptr.To(fmt.Sprintf("GPU-%d", i))},
				"model": {StringValue: ptr.To("H200")},
				"index": {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("143771Mi")}},
		}
		if bad[i] {
			d.Taints = []resourceapi.DeviceTaint{{Key: gpuv1.UnhealthyTaintKey, Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func allocatedTo(devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Driver: gpuv1.DriverName, Pool: "n1", Device: d})
	}
	return c
}

func reservedRule(device, by string) *resourceapi.DeviceTaintRule {
	return &resourceapi.DeviceTaintRule{Spec: resourceapi.DeviceTaintRuleSpec{
		DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(gpuv1.DriverName), Pool: ptr.To("n1"), Device: ptr.To(device)},
		Taint:          resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: by, Effect: resourceapi.DeviceTaintEffectNoSchedule},
	}}
}

func TestSelect(t *testing.T) {
	count := func(n int32) *rotav1.GPUReservation {
		return &rotav1.GPUReservation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}, Spec: rotav1.GPUReservationSpec{NodeName: "n1", Count: ptr.To(n)}}
	}
	uuids := func(u ...string) *rotav1.GPUReservation {
		r := count(1)
		r.Spec.Count, r.Spec.DeviceUUIDs = nil, u
		return r
	}
	holding := func(r *rotav1.GPUReservation, devices ...string) *rotav1.GPUReservation {
		for _, d := range devices {
			var i int
			fmt.Sscanf(d, "gpu-%d", &i) //nolint:errcheck // test input
			r.Status.Devices = append(r.Status.Devices, rotav1.ReservedDevice{Pool: "n1", Device: d, UUID: fmt.Sprintf("GPU-%d", i)})
		}
		return r
	}
	tests := map[string]struct {
		res        *rotav1.GPUReservation
		slices     []*resourceapi.ResourceSlice
		claims     []*resourceapi.ResourceClaim
		rules      []*resourceapi.DeviceTaintRule
		want       []string
		wantReason string
	}{
		"lowest index first": {res: count(2), slices: []*resourceapi.ResourceSlice{slice(8)}, want: []string{"gpu-0", "gpu-1"}},
		"skips unhealthy, allocated and reserved by others": {
			res: count(2), slices: []*resourceapi.ResourceSlice{slice(8, 0)},
			claims: []*resourceapi.ResourceClaim{allocatedTo("gpu-1")},
			rules:  []*resourceapi.DeviceTaintRule{reservedRule("gpu-2", "other.r")},
			want:   []string{"gpu-3", "gpu-4"},
		},
		"own rule does not make a GPU busy": {
			res: count(1), slices: []*resourceapi.ResourceSlice{slice(2)},
			rules: []*resourceapi.DeviceTaintRule{reservedRule("gpu-0", "ns.r")},
			want:  []string{"gpu-0"},
		},
		"index order, not name order": {res: count(1), slices: []*resourceapi.ResourceSlice{slice(12, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)}, want: []string{"gpu-10"}},
		"explicit UUIDs":              {res: uuids("GPU-5", "GPU-2"), slices: []*resourceapi.ResourceSlice{slice(8)}, want: []string{"gpu-5", "gpu-2"}},
		"held GPUs stay held even when allocated": {
			res: holding(count(1), "gpu-3"), slices: []*resourceapi.ResourceSlice{slice(8)},
			claims: []*resourceapi.ResourceClaim{allocatedTo("gpu-3")}, want: []string{"gpu-3"},
		},
		"held GPU gone from the slice stays held": {res: holding(count(1), "gpu-9"), slices: []*resourceapi.ResourceSlice{slice(8)}, want: []string{"gpu-9"}},
		"count changed: choose again":             {res: holding(count(2), "gpu-3"), slices: []*resourceapi.ResourceSlice{slice(8)}, want: []string{"gpu-0", "gpu-1"}},
		"no GPUs published":                       {res: count(1), wantReason: ReasonNoGPUs},
		"name too long for the taint value": {
			res: func() *rotav1.GPUReservation {
				r := count(1)
				r.Name = strings.Repeat("r", 62)
				return r
			}(),
			slices: []*resourceapi.ResourceSlice{slice(8)}, wantReason: ReasonNameTooLong,
		},
		"more GPUs than the node has":   {res: count(9), slices: []*resourceapi.ResourceSlice{slice(8)}, wantReason: ReasonTooManyGPUs},
		"not enough free":               {res: count(2), slices: []*resourceapi.ResourceSlice{slice(2)}, claims: []*resourceapi.ResourceClaim{allocatedTo("gpu-0")}, wantReason: ReasonInsufficientFree},
		"UUID not on the node":          {res: uuids("GPU-0", "GPU-X"), slices: []*resourceapi.ResourceSlice{slice(8)}, wantReason: ReasonDeviceNotFound},
		"UUID on an unhealthy GPU":      {res: uuids("GPU-1"), slices: []*resourceapi.ResourceSlice{slice(8, 1)}, wantReason: ReasonDeviceUnavailable},
		"unknown UUID after a busy one": {res: uuids("GPU-1", "GPU-X"), slices: []*resourceapi.ResourceSlice{slice(8, 1)}, wantReason: ReasonDeviceNotFound},
		"slices of other nodes and drivers ignored": {
			res: count(1),
			slices: []*resourceapi.ResourceSlice{func() *resourceapi.ResourceSlice {
				s := slice(2)
				s.Spec.NodeName = ptr.To("n2")
				return s
			}()},
			wantReason: ReasonNoGPUs,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Select(tc.res, NodeGPUs("n1", tc.slices, tc.claims, tc.rules))
			if tc.wantReason != "" {
				se, ok := err.(*SelectionError)
				if !ok || se.Reason != tc.wantReason {
					t.Fatalf("Select error = %v, want reason %s", err, tc.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			var names []string
			for _, g := range got {
				names = append(names, g.Device)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("selected devices (-want +got):\n%s", diff)
			}
		})
	}
}
