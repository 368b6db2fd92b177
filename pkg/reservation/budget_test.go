package reservation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
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

func claimWithConfigs(raws ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	for _, raw := range raws {
		driver := gpuv1.DriverName
		if strings.HasPrefix(raw, "other:") {
			driver, raw = "other.example.com", strings.TrimPrefix(raw, "other:")
		}
		c.Spec.Devices.Config = append(c.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(raw)},
			}},
		})
	}
	return c
}

func TestClaimMemoryMiB(t *testing.T) {
	const head = `"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig"`
	tests := map[string]struct {
		claim   *resourceapi.ResourceClaim
		want    *int64
		wantErr string
	}{
		"no config":                  {claim: claimWithConfigs()},
		"config without memoryMiB":   {claim: claimWithConfigs(`{` + head + `,"sharing":{"strategy":"TimeSlicing"}}`)},
		"memoryMiB":                  {claim: claimWithConfigs(`{` + head + `,"sharing":{"strategy":"TimeSlicing"},"memoryMiB":40960}`), want: ptr.To[int64](40960)},
		"last config wins":           {claim: claimWithConfigs(`{`+head+`,"memoryMiB":1024}`, `{`+head+`,"memoryMiB":2048}`), want: ptr.To[int64](2048)},
		"other driver ignored":       {claim: claimWithConfigs(`other:{"memoryMiB":1}`)},
		"unknown field names path":   {claim: claimWithConfigs(`{` + head + `,"memoryMB":1}`), wantErr: "spec.devices.config[0].opaque.parameters"},
		"negative memory is refused": {claim: claimWithConfigs(`{` + head + `,"memoryMiB":-1}`), wantErr: "memoryMiB"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ClaimMemoryMiB(tc.claim)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ClaimMemoryMiB (-want +got):\n%s", diff)
			}
		})
	}
}
