package controller

import (
	"context"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// releaser is the release step (docs/schedule.md, "Executing a transition"):
// it starts a Stop or a scale-down. Whether it has converged is the
// convergence step's call.
type releaser struct {
	aliases aliasGuard
	submit  submitter
	out     outcomes
}

// start refuses a Stop the alias guard blocks and otherwise submits the
// step. accepted: the step is now recorded Accepted.
func (r releaser) start(ctx context.Context, t *target, s *v1alpha1.TransitionStep) (accepted bool, err error) {
	if reason, msg := r.aliases.check(ctx, t, s); reason != "" {
		r.out.fail(s, reason, msg)
		return false, nil
	}
	return r.submit.submit(ctx, t, s, true)
}
