package advisor

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) { return nil, nil }
func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c[name]; ok {
		return dc, nil
	}
	return nil, fmt.Errorf("device class %s not found", name)
}

func h100Slice(node string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: gpuv1.DriverName, NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{gpuv1.AttributeModel: {StringValue: ptr.To("H100")}}})
	}
	return s
}

func h100Claim(ns, name string, count int64, node string, pods ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: count, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(`device.attributes[%q].model == "H100"`, gpuv1.DriverName)}}}}}}}}}
	if node != "" {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: gpuv1.DriverName, Pool: node, Device: "gpu-0"}}}}
		for _, p := range pods {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p})
		}
	}
	return c
}

func claimPod(ns, name, claim, node string, labels map[string]string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: v1.PodSpec{NodeName: node, ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}}}
	if node != "" {
		p.Spec.NodeSelector = map[string]string{v1.LabelHostname: node}
	}
	return p
}

// The fragmentation scenario's cluster
// (docs/design.md#scenario-fragmentation) at t=10 from objects: B's advice names the drain
// of A's replica on n1; with A's budget it is none, naming the budget.
func TestBuildFragmentation(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{h100Slice("n1", 2), h100Slice("n2", 2)}
	claims := map[string]*resourceapi.ResourceClaim{
		"team-a/a-1":   h100Claim("team-a", "a-1", 1, "n2", "a-1"),
		"team-a/a-2":   h100Claim("team-a", "a-2", 1, "n1", "a-2"),
		"team-b/ranks": h100Claim("team-b", "ranks", 2, ""),
	}
	serving := map[string]string{"app": "serving"}
	pods := []*v1.Pod{claimPod("team-a", "a-1", "a-1", "n2", serving), claimPod("team-a", "a-2", "a-2", "n1", serving),
		claimPod("team-b", "b-rank-0", "ranks", "", nil), claimPod("team-b", "b-rank-1", "ranks", "", nil)}
	var list []*resourceapi.ResourceClaim
	for _, c := range claims {
		list = append(list, c)
	}
	objects := func(pdbs ...*policyv1.PodDisruptionBudget) Objects {
		return Objects{Pool: gpupool.NewPool(slices, list, nil), Classes: classes{"gpu": {}}, CEL: gpupool.NewCELCache(), Pods: pods, PDBs: pdbs,
			Claim: func(ns, name string) (*resourceapi.ResourceClaim, error) {
				if c, ok := claims[ns+"/"+name]; ok {
					return c, nil
				}
				return nil, fmt.Errorf("claim %s/%s not found", ns, name)
			}}
	}
	snap, unit, err := Build(t.Context(), objects(), pods[2])
	if err != nil {
		t.Fatal(err)
	}
	if unit.Key != "team-b/b-rank-0" || len(unit.Groups) != 1 || len(unit.Groups[0].Pods) != 2 {
		t.Fatalf("unit %+v, want both ranks in one group", unit)
	}
	a := Advise(snap, unit, Options{})
	if len(a.Options) == 0 || a.Options[0].Kind != KindMove || !strings.Contains(a.Options[0].Summary, "evict team-a/a-2 (1 × H100) on n1") {
		t.Fatalf("first option %+v, want the drain of team-a/a-2 on n1", a.Options)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serving"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: serving}}}
	snap, unit, err = Build(t.Context(), objects(pdb), pods[2])
	if err != nil {
		t.Fatal(err)
	}
	a = Advise(snap, unit, Options{})
	if len(a.Options) != 1 || a.Options[0].Kind != KindNone || !strings.Contains(a.Options[0].Summary, "n1: team-a/a-2 is protected by PodDisruptionBudget team-a/serving") {
		t.Fatalf("advice %+v, want none naming the budget", a.Options)
	}
}
