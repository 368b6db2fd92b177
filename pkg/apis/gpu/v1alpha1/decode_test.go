package v1alpha1

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var typeMeta = metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind}

func TestDecode(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    *GpuConfig
		wantErr string // substring; names the field
	}{
		"minimal defaults to exclusive": {
			in:   `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig"}`,
			want: &GpuConfig{TypeMeta: typeMeta, Sharing: &Sharing{Strategy: Exclusive}},
		},
		"time slicing defaults its interval": {
			in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"},"memoryMiB":20480}`,
			want: &GpuConfig{TypeMeta: typeMeta, MemoryMiB: ptr.To[int64](20480),
				Sharing: &Sharing{Strategy: TimeSlicing, TimeSlicing: &TimeSlicingConfig{TimeSlice: DefaultTimeSlice}}},
		},
		"enum case is normalised": {
			in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"timeslicing","timeSlicing":{"timeSlice":"LONG"}}}`,
			want: &GpuConfig{TypeMeta: typeMeta,
				Sharing: &Sharing{Strategy: TimeSlicing, TimeSlicing: &TimeSlicingConfig{TimeSlice: LongTimeSlice}}},
		},
		"unknown field":             {in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","memoryMib":1}`, wantErr: `unknown field "memoryMib"`},
		"duplicate field":           {in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","memoryMiB":1,"memoryMiB":2}`, wantErr: `duplicate field "memoryMiB"`},
		"wrong kind":                {in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"TpuConfig"}`, wantErr: "kind: Unsupported value"},
		"wrong version":             {in: `{"apiVersion":"gpu.rota.dev/v1","kind":"GpuConfig"}`, wantErr: "apiVersion: Unsupported value"},
		"missing type meta":         {in: `{"memoryMiB":5}`, wantErr: "apiVersion/kind: Required value"},
		"bad strategy":              {in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`, wantErr: "sharing.strategy: Unsupported value: \"MPS\""},
		"bad time slice":            {in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Huge"}}}`, wantErr: "sharing.timeSlicing.timeSlice: Unsupported value"},
		"time slicing on exclusive": {in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Exclusive","timeSlicing":{}}}`, wantErr: "sharing.timeSlicing: Forbidden"},
		"zero memory":               {in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","memoryMiB":0}`, wantErr: "memoryMiB: Invalid value: 0"},
		"memory wrong type":         {in: `{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","memoryMiB":"20Gi"}`, wantErr: "memoryMiB"},
		"not json":                  {in: `sharing: {strategy: Exclusive}`, wantErr: "decoding GpuConfig"},
		"empty":                     {in: ``, wantErr: "empty GpuConfig"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Decode([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEffectiveTimeSlice(t *testing.T) {
	tests := map[string]struct {
		cfg  *GpuConfig
		want TimeSlice
		smi  int
	}{
		"exclusive":         {cfg: DefaultConfig(), want: DefaultTimeSlice, smi: 0},
		"time sliced long":  {cfg: &GpuConfig{Sharing: &Sharing{Strategy: TimeSlicing, TimeSlicing: &TimeSlicingConfig{TimeSlice: LongTimeSlice}}}, want: LongTimeSlice, smi: 3},
		"time sliced short": {cfg: &GpuConfig{Sharing: &Sharing{Strategy: TimeSlicing, TimeSlicing: &TimeSlicingConfig{TimeSlice: ShortTimeSlice}}}, want: ShortTimeSlice, smi: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.cfg.EffectiveTimeSlice()
			if got != tc.want || got.NvidiaSMIValue() != tc.smi {
				t.Errorf("EffectiveTimeSlice = %s (%d), want %s (%d)", got, got.NvidiaSMIValue(), tc.want, tc.smi)
			}
		})
	}
}
