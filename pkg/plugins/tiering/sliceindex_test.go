package tiering

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// poolDevices applies DeviceTaintRules the way the scheduler's slice
// tracker does, reading only the pools asked for: a rule's driver, pool and
// device each narrow it when set, a rule without a selector taints nothing,
// and the informer's objects are not modified.
func TestPoolDevicesAppliesTaintRules(t *testing.T) {
	taint := func(key string) resourceapi.DeviceTaint {
		return resourceapi.DeviceTaint{Key: key, Effect: resourceapi.DeviceTaintEffectNoSchedule}
	}
	rule := func(name string, sel *resourceapi.DeviceTaintSelector) *resourceapi.DeviceTaintRule {
		return &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceTaintRuleSpec{DeviceSelector: sel, Taint: taint(name)}}
	}
	slice := func(name, driver, pool string, devices ...string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: pool}}}
		for _, d := range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d})
		}
		return s
	}
	n1 := slice("n1", testDriver, "n1", "gpu-0", "gpu-1")
	n1.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{taint("own")}
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{slicesByPoolIndex: sliceByPool})
	for _, s := range []*resourceapi.ResourceSlice{n1, slice("n2", testDriver, "n2", "gpu-0"), slice("other", "other.example.com", "n1", "dev-0")} {
		if err := slices.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	rules := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{taintRulesByPoolIndex: taintRuleByPool})
	for _, r := range []*resourceapi.DeviceTaintRule{
		rule("no-selector", nil),
		rule("driver", &resourceapi.DeviceTaintSelector{Driver: ptr.To(testDriver)}),
		rule("pool-n1", &resourceapi.DeviceTaintSelector{Pool: ptr.To("n1")}),
		rule("n1-gpu-1", &resourceapi.DeviceTaintSelector{Driver: ptr.To(testDriver), Pool: ptr.To("n1"), Device: ptr.To("gpu-1")}),
		rule("n2-only", &resourceapi.DeviceTaintSelector{Driver: ptr.To(testDriver), Pool: ptr.To("n2")}),
		rule("other-driver", &resourceapi.DeviceTaintSelector{Driver: ptr.To("other.example.com")}),
	} {
		if err := rules.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	p := &poolDevices{slices: slices, rules: rules}
	got, err := p.devices([]structured.DeviceID{structured.MakeDeviceID(testDriver, "n1", "gpu-0")})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for id, d := range got {
		keys[id.String()] = []string{}
		for _, tt := range d.Taints {
			keys[id.String()] = append(keys[id.String()], tt.Key)
		}
	}
	want := map[string][]string{
		testDriver + "/n1/gpu-0": {"own", "driver", "pool-n1"},
		testDriver + "/n1/gpu-1": {"driver", "pool-n1", "n1-gpu-1"},
	}
	sortKeys := cmp.Transformer("sort", func(in []string) map[string]bool {
		out := map[string]bool{}
		for _, s := range in {
			out[s] = true
		}
		return out
	})
	if diff := cmp.Diff(want, keys, sortKeys); diff != "" {
		t.Errorf("taints of the devices of pool n1 (-want +got):\n%s", diff)
	}
	if len(n1.Spec.Devices[0].Taints) != 1 || len(n1.Spec.Devices[1].Taints) != 0 {
		t.Errorf("the informer's slice was modified: %+v", n1.Spec.Devices)
	}

	untainted := &poolDevices{slices: slices}
	got, err = untainted.devices([]structured.DeviceID{structured.MakeDeviceID(testDriver, "n2", "gpu-0")})
	if err != nil {
		t.Fatal(err)
	}
	if d := got[structured.MakeDeviceID(testDriver, "n2", "gpu-0")]; len(got) != 1 || d == nil || len(d.Taints) != 0 {
		t.Errorf("without DeviceTaintRules, pool n2 = %+v; want its one device as published", got)
	}
}
