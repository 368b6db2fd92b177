package resources

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/gpu/gputest"
	"github.com/rota-dev/rota/pkg/driver/health"
)

func inventory(t *testing.T, profile string) gpu.Inventory {
	t.Helper()
	_, inv := gputest.Inventory(t, "node-a", profile, testingclock.NewFakeClock(time.Unix(0, 0)))
	return inv
}

func TestDevice(t *testing.T) {
	inv := inventory(t, "hgx-h200")
	s := func(v string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(v)} }
	v := func(v string) resourceapi.DeviceAttribute {
		return resourceapi.DeviceAttribute{VersionValue: ptr.To(v)}
	}
	i := func(v int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: ptr.To(v)} }
	want := resourceapi.Device{
		Name: "gpu-5",
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"uuid":                            s(gpu.MockUUID("node-a", 5)),
			"productName":                     s("NVIDIA H200 141GB HBM3e"),
			"model":                           s("H200"),
			"architecture":                    s("Hopper"),
			"cudaComputeCapability":           v("9.0.0"),
			"driverVersion":                   v("560.35.3"),
			"driverVersionRaw":                s("560.35.03"),
			"cudaDriverVersion":               v("12.6.0"),
			"index":                           i(5),
			"resource.kubernetes.io/pciBusID": s("0000:ab:00.0"),
			"resource.kubernetes.io/numaNode": i(1),
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse("143771Mi")},
		},
	}
	got := Device(&inv, inv.GPUs[5], health.Status{State: health.Healthy}, Options{})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Device (-want +got):\n%s", diff)
	}
}

// TestConsumableMemory: with the option every GPU may be allocated to
// several claims, and its memory is consumable capacity whose default
// request is the whole GPU, so a claim that asks for no memory consumes all
// of it; without the option nothing of that is published.
func TestConsumableMemory(t *testing.T) {
	inv := inventory(t, "hgx-h200")
	whole := resource.MustParse("143771Mi")
	tests := map[string]struct {
		opts      Options
		wantShare *bool
		want      resourceapi.DeviceCapacity
	}{
		"off (default)": {want: resourceapi.DeviceCapacity{Value: whole}},
		"on": {
			opts:      Options{ConsumableMemory: true},
			wantShare: ptr.To(true),
			want: resourceapi.DeviceCapacity{Value: whole, RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    ptr.To(whole),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Mi"))},
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := ForNode("node-a", &inv, nil, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range res.Pools["node-a"].Slices[0].Devices {
				if diff := cmp.Diff(tc.wantShare, d.AllowMultipleAllocations); diff != "" {
					t.Errorf("%s: allowMultipleAllocations (-want +got):\n%s", d.Name, diff)
				}
				if diff := cmp.Diff(tc.want, d.Capacity["memory"]); diff != "" {
					t.Errorf("%s: memory capacity (-want +got):\n%s", d.Name, diff)
				}
			}
		})
	}
}

func TestTaints(t *testing.T) {
	tests := map[string]struct {
		status health.Status
		want   []resourceapi.DeviceTaint
	}{
		"healthy":   {status: health.Status{State: health.Healthy}},
		"unknown":   {},
		"unhealthy": {status: health.Status{State: health.Unhealthy, Reason: "xid-79"}, want: []resourceapi.DeviceTaint{{Key: "gpu.rota.dev/unhealthy", Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}},
		"degraded":  {status: health.Status{State: health.Degraded, Reason: "xid-13"}, want: []resourceapi.DeviceTaint{{Key: "gpu.rota.dev/unhealthy", Value: "xid-13", Effect: resourceapi.DeviceTaintEffectNone}}},
	}
	inv := inventory(t, "l4x2")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Device(&inv, inv.GPUs[0], tc.status, Options{}).Taints
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForNode(t *testing.T) {
	inv := inventory(t, "h100:4,a100:4")
	res, err := ForNode("node-a", &inv, map[int]health.Status{6: {State: health.Unhealthy, Reason: "gpu-lost"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool, ok := res.Pools["node-a"]
	if !ok || len(res.Pools) != 1 || len(pool.Slices) != 1 {
		t.Fatalf("want one pool node-a with one slice, got %+v", res.Pools)
	}
	var names, models []string
	for _, d := range pool.Slices[0].Devices {
		names = append(names, d.Name)
		models = append(models, *d.Attributes["model"].StringValue)
		if n := len(d.Attributes) + len(d.Capacity); n > 32 {
			t.Errorf("%s: %d attributes+capacities", d.Name, n)
		}
		if (d.Name == "gpu-6") != (len(d.Taints) == 1) {
			t.Errorf("%s: taints %v", d.Name, d.Taints)
		}
	}
	if diff := cmp.Diff([]string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}, names); diff != "" {
		t.Errorf("device names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"H100", "H100", "H100", "H100", "A100", "A100", "A100", "A100"}, models); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestLongStringsAreCut(t *testing.T) {
	inv := inventory(t, "l4x2")
	g := inv.GPUs[0]
	g.ProductName = strings.Repeat("x", 100)
	d := Device(&inv, g, health.Status{}, Options{})
	if n := len(*d.Attributes["productName"].StringValue); n != 64 {
		t.Errorf("productName length %d, want 64", n)
	}
	if err := checkLimits(d); err != nil {
		t.Error(err)
	}
}
