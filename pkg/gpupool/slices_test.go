package gpupool

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// gpuSlice publishes n GPUs of model on node, one pool of one slice.
func gpuSlice(node, model string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "gpu.rota.dev", NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model": {StringValue: ptr.To(model)},
				"uuid":  {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, i))},
			},
		})
	}
	return s
}

func TestPlainNodes(t *testing.T) {
	plain := gpuSlice("plain", "H100", 2)
	updating := gpuSlice("updating", "H100", 2)
	updating.Spec.Pool.ResourceSliceCount = 2 // the second slice has not arrived
	partitioned := gpuSlice("partitioned", "H100", 2)
	partitioned.Spec.Devices[1].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "mem"}}
	shared := gpuSlice("shared", "H200", 1)
	shared.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
	v := NewSlices([]*resourceapi.ResourceSlice{plain, updating, partitioned, shared})
	want := map[string]bool{"updating": true, "partitioned": true, "shared": true}
	if diff := cmp.Diff(want, v.complexNodes); diff != "" {
		t.Errorf("complex nodes (-want +got):\n%s", diff)
	}
	if !v.Plain("plain") || v.Plain("shared") {
		t.Errorf("Plain(plain) = %v, Plain(shared) = %v; want true, false", v.Plain("plain"), v.Plain("shared"))
	}
	if diff := cmp.Diff([]string{"partitioned", "plain", "shared", "updating"}, v.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

// A view is reused only while the very same slice objects are listed; a
// changed, added or removed slice builds a new one.
func TestSliceCache(t *testing.T) {
	a := gpuSlice("node-a", "H100", 2)
	b := gpuSlice("node-b", "H100", 2)
	var c SliceCache
	first := c.Get([]*resourceapi.ResourceSlice{a, b})
	if got := c.Get([]*resourceapi.ResourceSlice{b, a}); got != first {
		t.Error("same slices in another order: view rebuilt, want it reused")
	}
	changed := b.DeepCopy()
	changed.Spec.Devices = changed.Spec.Devices[:1]
	second := c.Get([]*resourceapi.ResourceSlice{a, changed})
	if second == first {
		t.Fatal("a changed slice object: view reused")
	}
	if n := len(second.ByNode["node-b"]); n != 1 {
		t.Errorf("node-b has %d devices in the new view, want 1", n)
	}
	if got := c.Get([]*resourceapi.ResourceSlice{a}); got == second || len(got.ByNode["node-b"]) != 0 {
		t.Error("a removed slice: view reused or node-b still listed")
	}
	var none *SliceCache
	slices := []*resourceapi.ResourceSlice{a}
	if v1, v2 := none.Get(slices), none.Get(slices); v1 == v2 {
		t.Error("a nil cache reused a view")
	}
}
