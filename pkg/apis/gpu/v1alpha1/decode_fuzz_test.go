package v1alpha1

import (
	"testing"
)

// FuzzDecode checks that no input panics the decoder and that whatever it
// accepts is valid and survives an encode/decode round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig"}`,
		`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Long"}},"memoryMiB":40960}`,
		`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Exclusive"},"memoryMiB":-1}`,
		`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":null}`,
		`{"sharing":{"timeSlicing":{"timeSlice":"short"}}}`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := Decode(raw)
		if err != nil {
			return
		}
		if errs := cfg.Validate(); len(errs) > 0 {
			t.Fatalf("Decode accepted an invalid config: %v", errs)
		}
		again, err := Encode(cfg)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		back, err := Decode(again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if back.EffectiveTimeSlice() != cfg.EffectiveTimeSlice() || back.IsTimeSliced() != cfg.IsTimeSliced() {
			t.Fatalf("round trip changed the config: %s", again)
		}
	})
}
