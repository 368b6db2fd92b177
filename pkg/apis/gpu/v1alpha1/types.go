package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

const (
	// APIVersion of GpuConfig.
	APIVersion = DriverName + "/v1alpha1"
	// Kind of GpuConfig.
	Kind = "GpuConfig"
)

// GpuConfig configures how a prepared GPU is shared and how much of its memory
// the consumer may use.
type GpuConfig struct {
	metav1.TypeMeta `json:",inline"`

	// Sharing says whether the GPU is the claim's alone or time-sliced with
	// other claims. Defaults to Exclusive.
	Sharing *Sharing `json:"sharing,omitempty"`

	// MemoryMiB is the consumer's VRAM budget in MiB. Rota's scheduler admits
	// time-sliced members against a reservation's budget with it; the driver
	// refuses a value larger than the GPU.
	MemoryMiB *int64 `json:"memoryMiB,omitempty"`
}

// SharingStrategy is the discriminator of Sharing.
type SharingStrategy string

const (
	// Exclusive: one claim per GPU; a second exclusive claim on the same GPU
	// fails to prepare.
	Exclusive SharingStrategy = "Exclusive"
	// TimeSlicing: several claims share the GPU by time slices.
	TimeSlicing SharingStrategy = "TimeSlicing"
)

// Sharing is a discriminated union: Strategy selects which of the pointer
// sub-configs may be set.
type Sharing struct {
	Strategy SharingStrategy `json:"strategy"`
	// TimeSlicing is only allowed with strategy TimeSlicing.
	TimeSlicing *TimeSlicingConfig `json:"timeSlicing,omitempty"`
}

// TimeSlice is the scheduling interval of a time-sliced GPU.
type TimeSlice string

const (
	DefaultTimeSlice TimeSlice = "Default"
	ShortTimeSlice   TimeSlice = "Short"
	MediumTimeSlice  TimeSlice = "Medium"
	LongTimeSlice    TimeSlice = "Long"
)

// TimeSlicingConfig tunes time-slicing.
type TimeSlicingConfig struct {
	// TimeSlice defaults to Default (the driver's own interval).
	TimeSlice TimeSlice `json:"timeSlice,omitempty"`
}

// NvidiaSMIValue is the value of `nvidia-smi compute-policy --set-timeslice`.
func (t TimeSlice) NvidiaSMIValue() int {
	switch t {
	case ShortTimeSlice:
		return 1
	case MediumTimeSlice:
		return 2
	case LongTimeSlice:
		return 3
	default:
		return 0
	}
}

// IsTimeSliced reports whether the (defaulted) config shares the GPU.
func (c *GpuConfig) IsTimeSliced() bool {
	return c.Sharing != nil && c.Sharing.Strategy == TimeSlicing
}

// EffectiveTimeSlice is the interval the GPU must run with for this config;
// Default for exclusive use.
func (c *GpuConfig) EffectiveTimeSlice() TimeSlice {
	if c.IsTimeSliced() && c.Sharing.TimeSlicing != nil && c.Sharing.TimeSlicing.TimeSlice != "" {
		return c.Sharing.TimeSlicing.TimeSlice
	}
	return DefaultTimeSlice
}
