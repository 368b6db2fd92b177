package gpupool

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
)

func allocatedClaim(ns, name, pool, device string, pods ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.rota.dev", Pool: pool, Device: device}},
		}}},
	}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p})
	}
	return c
}

// The pool joins slices and claims: which device is allocated to which
// claim and pods, and how many devices of each model a node has.
func TestNewPool(t *testing.T) {
	p := NewPool(
		[]*resourceapi.ResourceSlice{gpuSlice("n2", "A100", 2), gpuSlice("n1", "H100", 3)},
		[]*resourceapi.ResourceClaim{allocatedClaim("ml", "c", "n1", "gpu-1", "trainer")},
		nil)
	if diff := cmp.Diff([]string{"n1", "n2"}, p.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	d := p.ByID[structured.MakeDeviceID("gpu.rota.dev", "n1", "gpu-1")]
	if !d.Allocated || d.HolderClaim != (types.NamespacedName{Namespace: "ml", Name: "c"}) {
		t.Errorf("gpu-1: allocated %v to %v, want allocated to ml/c", d.Allocated, d.HolderClaim)
	}
	if diff := cmp.Diff([]types.NamespacedName{{Namespace: "ml", Name: "trainer"}}, d.Holders); diff != "" {
		t.Errorf("holders (-want +got):\n%s", diff)
	}
	if d.Model() != "H100" || d.UUID() != "GPU-n1-1" {
		t.Errorf("model %q uuid %q, want H100 GPU-n1-1", d.Model(), d.UUID())
	}
	if len(p.Devices()) != 5 {
		t.Errorf("%d devices, want 5", len(p.Devices()))
	}
	for name, tc := range map[string]struct {
		node string
		free bool
		want map[string]int
	}{
		"whole pool":   {want: map[string]int{"H100": 3, "A100": 2}},
		"free in pool": {free: true, want: map[string]int{"H100": 2, "A100": 2}},
		"one node":     {node: "n1", want: map[string]int{"H100": 3}},
		"free on node": {node: "n1", free: true, want: map[string]int{"H100": 2}},
	} {
		if diff := cmp.Diff(tc.want, p.CountByModel(tc.node, tc.free)); diff != "" {
			t.Errorf("%s: CountByModel (-want +got):\n%s", name, diff)
		}
	}
}

// A reservation holds a device through its rota.dev/reserved taint, whose
// value names the GPUReservation (docs/reservations.md).
func TestReservedBy(t *testing.T) {
	s := gpuSlice("n1", "H100", 2)
	s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{
		{Key: "gpu.rota.dev/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule},
		{Key: "rota.dev/reserved", Value: "ml.train", Effect: resourceapi.DeviceTaintEffectNoSchedule},
	}
	p := NewPool([]*resourceapi.ResourceSlice{s}, nil, nil)
	held, free := p.ByNode["n1"][0], p.ByNode["n1"][1]
	if held.ReservedBy() != "ml.train" || free.ReservedBy() != "" {
		t.Errorf("ReservedBy = %q, %q; want ml.train, \"\"", held.ReservedBy(), free.ReservedBy())
	}
	if taint := BlockingTaint(held.Device, []resourceapi.DeviceToleration{{Key: "gpu.rota.dev/unhealthy", Operator: resourceapi.DeviceTolerationOpExists}}); taint == nil || taint.Key != "rota.dev/reserved" {
		t.Errorf("BlockingTaint = %v, want the reserved taint", taint)
	}
}

func TestClaimRequests(t *testing.T) {
	claim := &resourceapi.ResourceClaim{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
		{Name: "plain", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 2}},
		{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "h100", DeviceClassName: "gpu", Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}},
			{Name: "all", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeAll},
		}},
	}}}}
	all := ClaimRequests(claim)
	if len(all) != 2 || all[0].Tiered || !all[1].Tiered {
		t.Fatalf("ClaimRequests = %+v, want one plain and one tiered request", all)
	}
	if all[0].Ref(0) != "plain" || all[1].Ref(1) != "gpu/all" {
		t.Errorf("refs %q, %q; want plain, gpu/all", all[0].Ref(0), all[1].Ref(1))
	}
	tiered := TieredRequests(claim)
	want := []Tier{{Name: "h100", Class: "gpu", Selectors: []string{"true"}, Count: 1}, {Name: "all", Class: "gpu", Count: 1, All: true}}
	if len(tiered) != 1 || tiered[0].Name != "gpu" {
		t.Fatalf("TieredRequests = %+v, want request gpu", tiered)
	}
	if diff := cmp.Diff(want, tiered[0].Tiers); diff != "" {
		t.Errorf("tiers (-want +got):\n%s", diff)
	}
}

type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) { return nil, nil }
func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c[name]; ok {
		return dc, nil
	}
	return nil, errNotFound
}

var errNotFound = errors.New("not found")

// A matcher applies the class's selectors, then the tier's, and names the
// first that rejects a device; results are remembered per device.
func TestMatcher(t *testing.T) {
	dc := &resourceapi.DeviceClass{Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
		{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.rota.dev"`}},
	}}}
	results := NewMatchCache()
	m, err := NewMatcher(classes{"gpu": dc}, NewCELCache(), results, Tier{Class: "gpu", Selectors: []string{`device.attributes["gpu.rota.dev"].model == "H100"`}})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool([]*resourceapi.ResourceSlice{gpuSlice("n1", "H100", 1), gpuSlice("n2", "A100", 1)}, nil, nil)
	h100, a100 := p.ByNode["n1"][0], p.ByNode["n2"][0]
	if !m.Matches(t.Context(), h100) || m.Matches(t.Context(), a100) {
		t.Errorf("Matches(H100), Matches(A100) = %v, %v; want true, false", m.Matches(t.Context(), h100), m.Matches(t.Context(), a100))
	}
	if f, err := m.FirstFailing(t.Context(), "gpu.rota.dev", a100.Device); err != nil || f != `device.attributes["gpu.rota.dev"].model == "H100"` {
		t.Errorf("FirstFailing(A100) = %q, %v", f, err)
	}
	if len(results.results) != 4 {
		t.Errorf("%d results cached, want 4 (2 devices, 2 expressions)", len(results.results))
	}
	if _, err := NewMatcher(classes{}, NewCELCache(), nil, Tier{Class: "missing"}); !errors.Is(err, ErrNoClass) {
		t.Errorf("missing class: %v, want ErrNoClass", err)
	}
	bad, _ := NewMatcher(classes{"gpu": dc}, NewCELCache(), nil, Tier{Class: "gpu", Selectors: []string{"device.("}})
	if _, err := bad.FirstFailing(t.Context(), "gpu.rota.dev", h100.Device); err == nil || bad.Matches(t.Context(), h100) {
		t.Error("a selector that does not compile: no error, or it matches")
	}
}

// The reservation controller reads slices without DeviceTaintRules
// applied: a reservation's rule names the device it holds.
func TestReservedByRules(t *testing.T) {
	rule := func(name, key, value string, driver *string, pool, device string) *resourceapi.DeviceTaintRule {
		return &resourceapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: driver, Pool: &pool, Device: &device},
				Taint:          resourceapi.DeviceTaint{Key: key, Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule},
			},
		}
	}
	other := "other.dev"
	got := ReservedByRules([]*resourceapi.DeviceTaintRule{
		rule("a", "rota.dev/reserved", "ml.train", nil, "n1", "gpu-0"),
		rule("b", "rota.dev/reserved", "ml.serve", &other, "n1", "gpu-1"),
		rule("c", "gpu.rota.dev/unhealthy", "xid", nil, "n1", "gpu-2"),
	}, "gpu.rota.dev")
	if len(got) != 1 || got[structured.MakeDeviceID("gpu.rota.dev", "n1", "gpu-0")] != "ml.train" {
		t.Errorf("ReservedByRules = %v, want only n1/gpu-0 held by ml.train", got)
	}
}
