package tiering

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// TestFastPathAgreesWithAllocator ranks every node of random clusters twice,
// by counting and with the structured allocator, and requires the same
// rank: the fast path is an optimisation, never a second opinion.
func TestFastPathAgreesWithAllocator(t *testing.T) {
	models := []string{"H100", "A100", "L4"}
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			var nodes []*v1.Node
			var slices []*resourceapi.ResourceSlice
			var claims []*resourceapi.ResourceClaim
			for n := range 30 {
				name := fmt.Sprintf("node-%02d", n)
				nodes = append(nodes, testNode(name))
				devs := make([]gpu, 1+rng.IntN(8))
				for i := range devs {
					devs[i] = gpu{model: models[rng.IntN(len(models))], memGiB: []int64{40, 80}[rng.IntN(2)], tainted: rng.IntN(10) == 0}
				}
				slices = append(slices, testSlice(name, devs...))
				for i := range devs {
					if rng.IntN(3) == 0 {
						claims = append(claims, allocatedClaim(fmt.Sprintf("used-%s-%d", name, i), name, fmt.Sprintf("gpu-%d", i)))
					}
				}
			}
			pod := tieredClaim("p", 1+rng.Int64N(3), "H100", "A100", "L4")
			if seed%2 == 1 {
				// A hard constraint on every tier: at least 60 GiB.
				for i := range pod.Spec.Devices.Requests[0].FirstAvailable {
					sub := &pod.Spec.Devices.Requests[0].FirstAvailable[i]
					sub.Selectors = append(sub.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{
						Expression: fmt.Sprintf("device.capacity[%q].memory.compareTo(quantity(\"60Gi\")) >= 0", testDriver),
					}})
				}
			}
			e := newEnv(t, nodes, slices, append(claims, pod))
			cs := framework.NewCycleState()
			if _, st := e.tiering.PreFilter(e.ctx, cs, testPod("p"), e.nodeInfos); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st)
			}
			s, err := getPreFilterState(cs)
			if err != nil {
				t.Fatal(err)
			}
			if !s.simple {
				t.Fatal("a single firstAvailable request should take the fast path")
			}
			inv, err := e.tiering.cycleInventory(e.ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			slow := *s
			slow.simple = false
			var matchers sync.Map
			feasible := 0
			for _, ni := range e.nodeInfos {
				fast, err := e.tiering.rankNode(e.ctx, s, inv, ni.Node(), &matchers)
				if err != nil {
					t.Fatal(err)
				}
				want, err := e.tiering.rankNode(e.ctx, &slow, inv, ni.Node(), &matchers)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, fast); diff != "" {
					t.Errorf("node %s: counting disagrees with the allocator (-allocator +counting):\n%s", ni.Node().Name, diff)
				}
				if want.Feasible {
					feasible++
				}
			}
			if feasible == 0 {
				t.Error("no feasible node: the case compares nothing")
			}
		})
	}
}

// allocatedClaim is a claim already allocated one device on node.
func allocatedClaim(name, node, device string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: testDriver}}},
		}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: testDriver, Pool: node, Device: device,
			}}},
		}},
	}
}

func TestSimpleClaimShape(t *testing.T) {
	withConstraint := tieredClaim("p", 1, "H100", "A100")
	withConstraint.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To[resourceapi.FullyQualifiedName](testDriver + "/model")}}
	twoRequests := tieredClaim("p", 1, "H100", "A100")
	twoRequests.Spec.Devices.Requests = append(twoRequests.Spec.Devices.Requests, resourceapi.DeviceRequest{
		Name: "second", FirstAvailable: twoRequests.Spec.Devices.Requests[0].FirstAvailable,
	})
	allMode := tieredClaim("p", 1, "H100", "A100")
	allMode.Spec.Devices.Requests[0].FirstAvailable[1].AllocationMode = resourceapi.DeviceAllocationModeAll
	tests := map[string]struct {
		claims []*resourceapi.ResourceClaim
		want   bool
	}{
		"one tiered request":            {claims: []*resourceapi.ResourceClaim{tieredClaim("p", 2, "H100", "A100")}, want: true},
		"two claims compete":            {claims: []*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100"), tieredClaim("q", 1, "H100")}},
		"matchAttribute constraint":     {claims: []*resourceapi.ResourceClaim{withConstraint}},
		"two requests in one claim":     {claims: []*resourceapi.ResourceClaim{twoRequests}},
		"allocation mode All in a tier": {claims: []*resourceapi.ResourceClaim{allMode}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := simpleClaimShape(tc.claims); got != tc.want {
				t.Errorf("simpleClaimShape = %v, want %v", got, tc.want)
			}
		})
	}
}
