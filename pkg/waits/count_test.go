package waits

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpupool/gpupooltest"
)

func memTier(q string) gpupool.Tier {
	if q == "" {
		return gpupool.Tier{Name: "gpu", Count: 1}
	}
	return gpupool.Tier{Name: "gpu", Count: 1, Capacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(q)}}
}

// A claim result's consumed capacity counts when the pool is built from
// claims alone (kubectl rota pool), so a full shared GPU is not counted free
// and the wait is InsufficientCapacity, not fragmentation.
func TestFullSharedGPUIsInsufficientCapacity(t *testing.T) {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: "gpu.rota.dev", Pool: "h200-0", Device: "gpu-0",
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("140000Mi")},
			}},
		}}},
	}
	p := gpupool.NewPool([]*resourceapi.ResourceSlice{gpupooltest.SharedH200Slice()}, []*resourceapi.ResourceClaim{claim}, nil)
	r := gpupool.Request{Name: "gpu", Tiers: []gpupool.Tier{memTier("8Gi")}}
	tc := CountTier(t.Context(), p, &gpupool.Matcher{}, r, 0, 0, "", nil)
	if tc.Free["h200-0"] != 0 || tc.Matching["h200-0"] != 1 {
		t.Fatalf("free %v of matching %v, want 0 of 1", tc.Free, tc.Matching)
	}
	v := Classify(Attempt{Requests: [][]TierCounts{{tc}}, DeviceConstraintNodes: []string{"h200-0"}})
	if v.Reason != InsufficientCapacity {
		t.Errorf("reason %s (%s), want %s", v.Reason, v.Message, InsufficientCapacity)
	}
}

// nodeKinds are one H200 on node h200-0 as the driver publishes it with
// and without --consumable-memory.
func nodeKinds() map[string]*resourceapi.ResourceSlice {
	plain := gpupooltest.SharedH200Slice()
	d := &plain.Spec.Devices[0]
	d.AllowMultipleAllocations = nil
	d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{gpuv1.CapacityMemory: {Value: resource.MustParse("143771Mi")}}
	return map[string]*resourceapi.ResourceSlice{"plain": plain, "consumable-memory": gpupooltest.SharedH200Slice()}
}

// memberClaim is a reservation member's claim holding gpu-0 of h200-0,
// with 8Gi of its memory where the GPU is shared.
func memberClaim(shared bool) *resourceapi.ResourceClaim {
	r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuv1.DriverName, Pool: "h200-0", Device: "gpu-0"}
	if shared {
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{gpuv1.CapacityMemory: resource.MustParse("8Gi")}
		r.ShareID = ptr.To(types.UID("share-1"))
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "member"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{r},
		}}},
	}
}

// TestCountTellsReservedFromUnhealthy counts, on both node kinds, a GPU
// that a reservation holds apart from one the driver tainted unhealthy:
// the reserved one (idle or used by members) is Reserved for a claim that
// does not tolerate the reservation, free for one that does; an unhealthy
// one is Tainted, reserved or not.
func TestCountTellsReservedFromUnhealthy(t *testing.T) {
	reserved := resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: "team-a.serving", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	unhealthy := resourceapi.DeviceTaint{Key: gpuv1.UnhealthyTaintKey, Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	member := []resourceapi.DeviceToleration{{Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual, Value: "team-a.serving", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	cases := map[string]struct {
		taints      []resourceapi.DeviceTaint
		tolerations []resourceapi.DeviceToleration
		memberHolds bool
		wantReason  Reason
		wantCounts  string // free/tainted/reserved on h200-0
	}{
		"idle reserved GPU, non-member":        {taints: []resourceapi.DeviceTaint{reserved}, wantReason: Reserved, wantCounts: "0/0/1"},
		"reserved GPU members use, non-member": {taints: []resourceapi.DeviceTaint{reserved}, memberHolds: true, wantReason: Reserved, wantCounts: "0/0/1"},
		"idle reserved GPU, member":            {taints: []resourceapi.DeviceTaint{reserved}, tolerations: member, wantCounts: "1/0/0"},
		"unhealthy GPU":                        {taints: []resourceapi.DeviceTaint{unhealthy}, wantReason: Unhealthy, wantCounts: "0/1/0"},
		"unhealthy reserved GPU, non-member":   {taints: []resourceapi.DeviceTaint{reserved, unhealthy}, wantReason: Unhealthy, wantCounts: "0/1/0"},
		"unhealthy reserved GPU, member":       {taints: []resourceapi.DeviceTaint{unhealthy, reserved}, tolerations: member, wantReason: Unhealthy, wantCounts: "0/1/0"},
	}
	for kind, slice := range nodeKinds() {
		for name, tc := range cases {
			t.Run(kind+"/"+name, func(t *testing.T) {
				s := slice.DeepCopy()
				s.Spec.Devices[0].Taints = tc.taints
				var claims []*resourceapi.ResourceClaim
				if tc.memberHolds {
					claims = append(claims, memberClaim(s.Spec.Devices[0].AllowMultipleAllocations != nil))
				}
				p := gpupool.NewPool([]*resourceapi.ResourceSlice{s}, claims, nil)
				tier := memTier("8Gi")
				tier.Tolerations = tc.tolerations
				r := gpupool.Request{Name: "gpu", Tiers: []gpupool.Tier{tier}}
				c := CountTier(t.Context(), p, &gpupool.Matcher{}, r, 0, 0, "team-a", nil)
				got := fmt.Sprintf("%d/%d/%d", c.Free["h200-0"], c.Tainted["h200-0"], c.Reserved["h200-0"])
				if got != tc.wantCounts {
					t.Errorf("free/tainted/reserved = %s, want %s", got, tc.wantCounts)
				}
				if tc.wantCounts == "0/0/1" && c.Reservations["team-a/serving"] != 1 {
					t.Errorf("reservations %v, want team-a/serving: 1", c.Reservations)
				}
				// A pod of another namespace learns that the GPU is
				// reserved, not by whom.
				if other := CountTier(t.Context(), p, &gpupool.Matcher{}, r, 0, 0, "team-b", nil); tc.wantCounts == "0/0/1" &&
					(other.Reservations[OtherNamespaces] != 1 || len(other.Reservations) != 1) {
					t.Errorf("reservations seen from team-b %v, want only %q: 1", other.Reservations, OtherNamespaces)
				}
				if tc.wantReason == "" {
					return
				}
				if v := Classify(Attempt{Requests: [][]TierCounts{{c}}}); v.Reason != tc.wantReason {
					t.Errorf("reason %s (%s), want %s", v.Reason, v.Message, tc.wantReason)
				}
			})
		}
	}
}

type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) { return nil, nil }
func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c[name]; ok {
		return dc, nil
	}
	return nil, fmt.Errorf("device class %s not found", name)
}

// modelSlice publishes n GPUs of model on node with a driver version.
func modelSlice(node, model, driverVersion string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: gpuv1.DriverName, NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			gpuv1.AttributeModel: {StringValue: ptr.To(model)}, "driverVersion": {StringValue: ptr.To(driverVersion)},
		}})
	}
	return s
}

// A GPU of another model counts as "other model", not as an unmet
// constraint; a GPU of the tier's model that a selector rejects (driver
// version) is an unmet constraint, named by its selector.
func TestCountTierOtherModelAndUnmet(t *testing.T) {
	dc := &resourceapi.DeviceClass{Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
		{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", gpuv1.DriverName)}}}}}
	model := fmt.Sprintf(`device.attributes[%q].model == "A100"`, gpuv1.DriverName)
	driver := fmt.Sprintf(`device.attributes[%q].driverVersion >= "570"`, gpuv1.DriverName)
	p := gpupool.NewPool([]*resourceapi.ResourceSlice{
		modelSlice("dgx-h100-0", "H100", "570", 8), modelSlice("dgx-a100-0", "A100", "570", 2), modelSlice("dgx-a100-1", "A100", "535", 4),
	}, nil, nil)
	tier := gpupool.Tier{Name: "a100", Class: "gpu", Count: 4, Selectors: []string{model, driver}}
	m, err := gpupool.NewMatcher(classes{"gpu": dc}, gpupool.NewCELCache(), gpupool.NewMatchCache(), tier)
	if err != nil {
		t.Fatal(err)
	}
	r := gpupool.Request{Name: "gpu", Tiered: true, Tiers: []gpupool.Tier{{Name: "h100"}, tier}}
	s := CountTier(t.Context(), p, m, r, 1, 0, "", nil).Stat()
	want := TierStat{Tier: "2/2", Name: "A100", Need: 4, Matching: 2, Free: 2, LargestFree: 2, LargestFreeNode: "dgx-a100-0",
		OtherModel: 8, Unmet: map[string]int{driver: 4}, Request: "gpu"}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("stat (-want +got):\n%s", diff)
	}
	if got, wantLine := s.Line(), "gpu 2/2 A100: 2/2 free (at most 2 on one node, dgx-a100-0), 0 allocated, 0 reserved, 0 tainted, 8 other model, 4 fail constraint "+driver; got != wantLine {
		t.Errorf("line %q, want %q", got, wantLine)
	}
}
