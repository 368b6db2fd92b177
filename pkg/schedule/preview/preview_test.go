package preview

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const driver = "gpu.rota.dev"

func slice(node string, n int) *resourceapi.ResourceSlice {
	devs := make([]resourceapi.Device, n)
	for i := range devs {
		devs[i] = resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)}
	}
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{
		Driver: driver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, Devices: devs}}
}

func allocated(node string, devices ...int) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(node, devices)}}
	var rs []resourceapi.DeviceRequestAllocationResult
	for _, d := range devices {
		rs = append(rs, resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: node, Device: fmt.Sprintf("gpu-%d", d)})
	}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: rs}}
	return c
}

func gpus(n int64) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: driver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: n},
	}}}}
}

func inputs(claims ...*resourceapi.ResourceClaim) Inputs {
	return Inputs{
		Nodes:  []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}},
		Slices: []*resourceapi.ResourceSlice{slice("n1", 2), slice("n2", 2)},
		Claims: claims,
		Classes: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.rota.dev"`}}}}}},
	}
}

func TestCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		in        Inputs
		demand    Demand
		fits      bool
		nodes     string
		inMessage string
	}{
		"free pool":                     {in: inputs(), demand: Demand{PodClaims: []resourceapi.ResourceClaimSpec{gpus(2)}, Pods: 2}, fits: true, nodes: "n1,n2"},
		"fragmented: 2 free on 2 nodes": {in: inputs(allocated("n1", 0), allocated("n2", 1)), demand: Demand{PodClaims: []resourceapi.ResourceClaimSpec{gpus(2)}, Pods: 1}, inMessage: "0 of 1 pods fit; free devices per node: n1=1, n2=1"},
		"second pod counts the first":   {in: inputs(allocated("n1", 0, 1)), demand: Demand{PodClaims: []resourceapi.ResourceClaimSpec{gpus(2)}, Pods: 2}, inMessage: "1 of 2 pods fit"},
		"one pod per node":              {in: inputs(allocated("n1", 0)), demand: Demand{PodClaims: []resourceapi.ResourceClaimSpec{gpus(1)}, Pods: 3}, fits: true, nodes: "n1,n2,n2"},
		"nothing asked":                 {in: inputs(), demand: Demand{}, fits: true},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := New().Check(context.Background(), tc.in, tc.demand)
			if err != nil {
				t.Fatal(err)
			}
			if res.Fits != tc.fits || (tc.fits && strings.Join(res.Nodes, ",") != tc.nodes) || !strings.Contains(res.Message, tc.inMessage) {
				t.Errorf("got fits=%v nodes=%v %q; want fits=%v nodes=%s containing %q", res.Fits, res.Nodes, res.Message, tc.fits, tc.nodes, tc.inMessage)
			}
		})
	}
}

// TestCheckConsumableCapacity: a GPU that allows multiple allocations and
// already holds a share still takes new shares within its remaining memory,
// as the scheduler's allocator decides.
func TestCheckConsumableCapacity(t *testing.T) {
	mem := func(gi int64) resource.Quantity { return *resource.NewQuantity(gi<<30, resource.BinarySI) }
	shareable := slice("n1", 1)
	shareable.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
	shareable.Spec.Devices[0].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {
		Value: mem(100), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(mem(100))},
	}}
	held := allocated("n1", 0)
	held.Status.Allocation.Devices.Results[0].ShareID = ptr.To(types.UID("share-1"))
	held.Status.Allocation.Devices.Results[0].ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": mem(60)}
	asking := func(gi int64) resourceapi.ResourceClaimSpec {
		spec := gpus(1)
		spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{
			Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": mem(gi)},
		}
		return spec
	}
	for name, tc := range map[string]struct {
		demand Demand
		fits   bool
	}{
		"a share that fits beside the held one":    {demand: Demand{PodClaims: []resourceapi.ResourceClaimSpec{asking(30)}, Pods: 1}, fits: true},
		"a share larger than what is left":         {demand: Demand{PodClaims: []resourceapi.ResourceClaimSpec{asking(50)}, Pods: 1}},
		"two shares that fit only one at a time":   {demand: Demand{PodClaims: []resourceapi.ResourceClaimSpec{asking(30)}, Pods: 2}},
		"no memory asked: the whole GPU (default)": {demand: Demand{PodClaims: []resourceapi.ResourceClaimSpec{gpus(1)}, Pods: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			in := inputs(held)
			in.Nodes, in.Slices = in.Nodes[:1], []*resourceapi.ResourceSlice{shareable}
			res, err := New().Check(context.Background(), in, tc.demand)
			if err != nil {
				t.Fatal(err)
			}
			if res.Fits != tc.fits {
				t.Errorf("fits = %v (%s), want %v", res.Fits, res.Message, tc.fits)
			}
		})
	}
}
