package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// maxConfigBytes bounds what the decoder reads; a GpuConfig is a few hundred bytes.
const maxConfigBytes = 64 << 10

// Decode parses raw opaque config strictly (unknown and duplicate fields are
// errors, field names are case-sensitive), applies defaults and normalisation
// and validates. Every error names the field it is about.
func Decode(raw []byte) (*GpuConfig, error) {
	if len(raw) == 0 {
		return nil, errors.New("empty GpuConfig")
	}
	if len(raw) > maxConfigBytes {
		return nil, fmt.Errorf("GpuConfig is %d bytes, at most %d are allowed", len(raw), maxConfigBytes)
	}
	var cfg GpuConfig
	strictErrs, err := sigsjson.UnmarshalStrict(raw, &cfg)
	if err != nil {
		return nil, fmt.Errorf("decoding GpuConfig: %w", err)
	}
	if len(strictErrs) > 0 {
		return nil, fmt.Errorf("decoding GpuConfig: %w", errors.Join(strictErrs...))
	}
	if cfg.APIVersion == "" || cfg.Kind == "" {
		return nil, fmt.Errorf("decoding GpuConfig: %w", field.Required(field.NewPath("apiVersion/kind"),
			fmt.Sprintf("must be %s %s", APIVersion, Kind)))
	}
	cfg.Normalize()
	cfg.Default()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid GpuConfig: %w", errs.ToAggregate())
	}
	return &cfg, nil
}

// Encode is the canonical JSON of a config, used for the checkpoint.
func Encode(cfg *GpuConfig) ([]byte, error) { return json.Marshal(cfg) }

// DefaultConfig is what a claim gets when neither its class nor the claim
// carries a GpuConfig: exclusive use, no memory budget.
func DefaultConfig() *GpuConfig {
	cfg := &GpuConfig{}
	cfg.Default()
	return cfg
}
