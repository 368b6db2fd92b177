package reservation

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

func TestBudgetMiB(t *testing.T) {
	tests := map[string]struct {
		memoryMiB int64
		headroom  string
		want      int64
		wantErr   string
	}{
		"H200 at the default 0.95":     {memoryMiB: 143771, headroom: "", want: 136582},
		"H200 at 0.95 written out":     {memoryMiB: 143771, headroom: "0.95", want: 136582},
		"H100 80GB at 0.9":             {memoryMiB: 81559, headroom: "0.9", want: 73403},
		"whole GPU":                    {memoryMiB: 143771, headroom: "1", want: 143771},
		"whole GPU with places":        {memoryMiB: 143771, headroom: "1.0000", want: 143771},
		"four places floor":            {memoryMiB: 10001, headroom: "0.3333", want: 3333},
		"zero is refused":              {headroom: "0.0", wantErr: "(0, 1]"},
		"above one is refused":         {headroom: "1.5", wantErr: "(0, 1]"},
		"five places are refused":      {headroom: "0.12345", wantErr: "four places"},
		"not a number is refused":      {headroom: "abc", wantErr: "decimal"},
		"negative fraction is refused": {headroom: "0.-5", wantErr: "decimal"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, err := ParseHeadroom(tc.headroom)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseHeadroom(%q) error = %v, want one containing %q", tc.headroom, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHeadroom(%q): %v", tc.headroom, err)
			}
			if diff := cmp.Diff(tc.want, BudgetMiB(tc.memoryMiB, h)); diff != "" {
				t.Errorf("BudgetMiB (-want +got):\n%s", diff)
			}
		})
	}
}

// config is one GpuConfig entry: raw parameters for the requests named
// ("other:" before raw makes it another driver's).
type config struct {
	raw      string
	requests []string
}

func claimWithConfigs(configs ...config) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{
		{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.rota.dev", Count: 2}},
		{Name: "tiered", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "big", DeviceClassName: "gpu.rota.dev", Count: 1}, {Name: "small", DeviceClassName: "gpu.rota.dev", Count: 1}}},
	}
	for _, cfg := range configs {
		driver, raw := gpuv1.DriverName, cfg.raw
		if strings.HasPrefix(raw, "other:") {
			driver, raw = "other.example.com", strings.TrimPrefix(raw, "other:")
		}
		c.Spec.Devices.Config = append(c.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{
			Requests: cfg.requests,
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(raw)},
			}},
		})
	}
	return c
}

const head = `"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig"`

func mem(n int64) string {
	return fmt.Sprintf(`{%s,"sharing":{"strategy":"TimeSlicing"},"memoryMiB":%d}`, head, n)
}

// The memoryMiB a device gets is the driver's: the last config that applies
// to its request, subrequest or every request decides, memoryMiB or not.
func TestClaimMemoryFor(t *testing.T) {
	tests := map[string]struct {
		claim   *resourceapi.ResourceClaim
		want    map[string]*int64 // request ref -> memoryMiB
		wantErr string
	}{
		"no config": {claim: claimWithConfigs(), want: map[string]*int64{"gpu": nil, "tiered/big": nil}},
		"config without memoryMiB": {
			claim: claimWithConfigs(config{raw: `{` + head + `,"sharing":{"strategy":"TimeSlicing"}}`}), want: map[string]*int64{"gpu": nil},
		},
		"one config for every request": {
			claim: claimWithConfigs(config{raw: mem(40960)}), want: map[string]*int64{"gpu": ptr.To[int64](40960), "tiered/small": ptr.To[int64](40960)},
		},
		"later config wins": {
			claim: claimWithConfigs(config{raw: mem(1024)}, config{raw: mem(2048)}), want: map[string]*int64{"gpu": ptr.To[int64](2048)},
		},
		"a later config without memoryMiB wins too, as in the driver": {
			claim: claimWithConfigs(config{raw: mem(1024)}, config{raw: `{` + head + `}`}), want: map[string]*int64{"gpu": nil},
		},
		"configs per request and subrequest": {
			claim: claimWithConfigs(config{raw: mem(8192), requests: []string{"gpu"}}, config{raw: mem(4096), requests: []string{"tiered"}}, config{raw: mem(1024), requests: []string{"tiered/small"}}),
			want:  map[string]*int64{"gpu": ptr.To[int64](8192), "tiered/big": ptr.To[int64](4096), "tiered/small": ptr.To[int64](1024)},
		},
		"a config for another request does not apply": {
			claim: claimWithConfigs(config{raw: mem(8192), requests: []string{"tiered"}}), want: map[string]*int64{"gpu": nil, "tiered/big": ptr.To[int64](8192)},
		},
		"other driver ignored":       {claim: claimWithConfigs(config{raw: `other:{"memoryMiB":1}`}), want: map[string]*int64{"gpu": nil}},
		"unknown field names path":   {claim: claimWithConfigs(config{raw: `{` + head + `,"memoryMB":1}`}), wantErr: "spec.devices.config[0].opaque.parameters"},
		"negative memory is refused": {claim: claimWithConfigs(config{raw: `{` + head + `,"memoryMiB":-1}`}), wantErr: "memoryMiB"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ClaimMemoryOf(tc.claim)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for ref, want := range tc.want {
				if diff := cmp.Diff(want, got.For(ref)); diff != "" {
					t.Errorf("For(%q) (-want +got):\n%s", ref, diff)
				}
			}
		})
	}
}

// A member is charged per allocated device, on the GPU it got, with its
// request's memoryMiB; what lands outside the held GPUs costs nothing.
func TestAllocationCharges(t *testing.T) {
	held := map[HeldGPU]int64{{"n1", "gpu-0"}: 143771, {"n1", "gpu-1"}: 143771}
	result := func(request, device string, consumedMiB int64) resourceapi.DeviceRequestAllocationResult {
		r := resourceapi.DeviceRequestAllocationResult{Request: request, Driver: gpuv1.DriverName, Pool: "n1", Device: device}
		if consumedMiB > 0 {
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{gpuv1.CapacityMemory: resource.MustParse(fmt.Sprintf("%dMi", consumedMiB))}
		}
		return r
	}
	alloc := func(configs []resourceapi.DeviceAllocationConfiguration, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocationResult {
		return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results, Config: configs}}
	}
	cfg := func(raw string, source resourceapi.AllocationConfigSource, requests ...string) resourceapi.DeviceAllocationConfiguration {
		return resourceapi.DeviceAllocationConfiguration{Source: source, Requests: requests, DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: gpuv1.DriverName, Parameters: runtime.RawExtension{Raw: []byte(raw)}}}}
	}
	claimCfg := []resourceapi.DeviceAllocationConfiguration{cfg(mem(40960), resourceapi.AllocationConfigSourceClaim)}
	tests := map[string]struct {
		alloc *resourceapi.AllocationResult
		want  Charges
	}{
		"one device": {alloc: alloc(claimCfg, result("gpu", "gpu-0", 40960)), want: Charges{{"n1", "gpu-0"}: 40960}},
		"two devices on two GPUs cost each its share": {
			alloc: alloc(claimCfg, result("gpu", "gpu-0", 40960), result("gpu", "gpu-1", 40960)),
			want:  Charges{{"n1", "gpu-0"}: 40960, {"n1", "gpu-1"}: 40960},
		},
		"two devices on one GPU cost it twice": {
			alloc: alloc(claimCfg, result("gpu", "gpu-0", 40960), result("other", "gpu-0", 40960)),
			want:  Charges{{"n1", "gpu-0"}: 81920},
		},
		"per-request configs": {
			alloc: alloc([]resourceapi.DeviceAllocationConfiguration{cfg(mem(8192), resourceapi.AllocationConfigSourceClaim, "a"), cfg(mem(1024), resourceapi.AllocationConfigSourceClaim, "b/small")},
				result("a", "gpu-0", 0), result("b/small", "gpu-1", 0)),
			want: Charges{{"n1", "gpu-0"}: 8192, {"n1", "gpu-1"}: 1024},
		},
		"the claim's config overrides the class's": {
			alloc: alloc([]resourceapi.DeviceAllocationConfiguration{cfg(mem(1024), resourceapi.AllocationConfigSourceClaim), cfg(mem(99999), resourceapi.AllocationConfigSourceClass)}, result("gpu", "gpu-0", 0)),
			want:  Charges{{"n1", "gpu-0"}: 1024},
		},
		"no memoryMiB: the memory consumed":             {alloc: alloc(nil, result("gpu", "gpu-0", 2048)), want: Charges{{"n1", "gpu-0"}: 2048}},
		"no memoryMiB, nothing consumed: the whole GPU": {alloc: alloc(nil, result("gpu", "gpu-1", 0)), want: Charges{{"n1", "gpu-1"}: 143771}},
		"device outside the held GPUs costs nothing":    {alloc: alloc(claimCfg, result("gpu", "gpu-7", 40960)), want: Charges{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := AllocationCharges(&resourceapi.ResourceClaim{}, tc.alloc, held)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("AllocationCharges (-want +got):\n%s", diff)
			}
		})
	}
}

// The controller reports a member's memory per device: count × memoryMiB
// before allocation, per allocated device after.
func TestClaimMemoryMiB(t *testing.T) {
	c := claimWithConfigs(config{raw: mem(4096)})
	got, err := ClaimMemoryMiB(c)
	if err != nil {
		t.Fatal(err)
	}
	// gpu: 2 × 4096, tiered: first subrequest 1 × 4096.
	if diff := cmp.Diff(ptr.To[int64](12288), got); diff != "" {
		t.Errorf("before allocation (-want +got):\n%s", diff)
	}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: gpuv1.DriverName, Pool: "n1", Device: "gpu-0"},
			{Request: "gpu", Driver: gpuv1.DriverName, Pool: "n1", Device: "gpu-1"},
		},
		Config: []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim, DeviceConfiguration: c.Spec.Devices.Config[0].DeviceConfiguration}},
	}}
	if got, err = ClaimMemoryMiB(c); err != nil || *got != 8192 {
		t.Errorf("after allocation = %v, %v; want 8192", got, err)
	}
}
