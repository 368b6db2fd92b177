package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxMemoryMiB is far above any GPU (16 TiB) and only guards against overflow
// in byte arithmetic.
const maxMemoryMiB = 16 << 20

// Validate checks a defaulted, normalised config and names each bad field.
func (c *GpuConfig) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	if c.MemoryMiB != nil && (*c.MemoryMiB < 1 || *c.MemoryMiB > maxMemoryMiB) {
		errs = append(errs, field.Invalid(field.NewPath("memoryMiB"), *c.MemoryMiB, "must be between 1 and 16777216"))
	}
	if c.Sharing != nil {
		errs = append(errs, c.Sharing.validate(field.NewPath("sharing"))...)
	}
	return errs
}

func (s *Sharing) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Strategy {
	case Exclusive:
		if s.TimeSlicing != nil {
			errs = append(errs, field.Forbidden(path.Child("timeSlicing"), "only allowed with strategy TimeSlicing"))
		}
	case TimeSlicing:
		if s.TimeSlicing != nil {
			switch s.TimeSlicing.TimeSlice {
			case DefaultTimeSlice, ShortTimeSlice, MediumTimeSlice, LongTimeSlice:
			default:
				errs = append(errs, field.NotSupported(path.Child("timeSlicing", "timeSlice"), s.TimeSlicing.TimeSlice,
					[]TimeSlice{DefaultTimeSlice, ShortTimeSlice, MediumTimeSlice, LongTimeSlice}))
			}
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("strategy"), s.Strategy, []SharingStrategy{Exclusive, TimeSlicing}))
	}
	return errs
}
