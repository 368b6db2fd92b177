package controller

import "context"

// Failpoints are called around every workload mutation. An error returned by
// one ends the pass at that point, as a crash would: tests use it to stop a
// controller between Submitting and the mutation, or between the mutation and
// Accepted.
type Failpoints interface {
	// BeforeMutation runs after the step is recorded Submitting and before the
	// workload is written.
	BeforeMutation(ctx context.Context, key string) error
	// AfterMutation runs after the workload write, before Accepted is recorded.
	// wrote is false when the write was found already applied (the key was on
	// the workload) and nothing was written.
	AfterMutation(ctx context.Context, key string, wrote bool) error
}

type noFailpoints struct{}

func (noFailpoints) BeforeMutation(context.Context, string) error      { return nil }
func (noFailpoints) AfterMutation(context.Context, string, bool) error { return nil }
