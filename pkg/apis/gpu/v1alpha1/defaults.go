package v1alpha1

import "strings"

// Default fills what the user left out: exclusive sharing, and the Default
// interval for time-slicing.
func (c *GpuConfig) Default() {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	if c.Sharing == nil {
		c.Sharing = &Sharing{}
	}
	if c.Sharing.Strategy == "" {
		c.Sharing.Strategy = Exclusive
	}
	if c.Sharing.Strategy == TimeSlicing {
		if c.Sharing.TimeSlicing == nil {
			c.Sharing.TimeSlicing = &TimeSlicingConfig{}
		}
		if c.Sharing.TimeSlicing.TimeSlice == "" {
			c.Sharing.TimeSlicing.TimeSlice = DefaultTimeSlice
		}
	}
}

// Normalize accepts the enum values in any letter case ("timeslicing",
// "LONG") and rewrites them to their canonical spelling, so that Validate and
// every comparison after it see one form.
func (c *GpuConfig) Normalize() {
	if c.Sharing == nil {
		return
	}
	c.Sharing.Strategy = SharingStrategy(canonical(string(c.Sharing.Strategy), string(Exclusive), string(TimeSlicing)))
	if ts := c.Sharing.TimeSlicing; ts != nil {
		ts.TimeSlice = TimeSlice(canonical(string(ts.TimeSlice),
			string(DefaultTimeSlice), string(ShortTimeSlice), string(MediumTimeSlice), string(LongTimeSlice)))
	}
}

func canonical(v string, known ...string) string {
	for _, k := range known {
		if strings.EqualFold(v, k) {
			return k
		}
	}
	return v
}
