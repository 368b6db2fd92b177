package state

import (
	"context"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

func timeSliceOf(s string) gpuv1.TimeSlice { return gpuv1.TimeSlice(s) }

// unprepareBatch undoes Prepare for a run of claims with the state locked:
// each claim's CDI spec goes and the claim leaves the checkpoint, then every
// GPU that no claim uses any more gets its default time slice back, and one
// checkpoint write records it all. Unpreparing an unknown claim succeeds (and
// removes a stray CDI spec). A claim whose GPU cannot be reset stays recorded
// so that the kubelet's retry resets it.
func (s *State) unprepareBatch(ctx context.Context, ops []*op) {
	removed := map[string]checkpoint.Claim{}
	errs := map[*op]error{}
	for _, o := range ops {
		if err := s.opts.CDI.Remove(o.uid); err != nil {
			errs[o] = err
			continue
		}
		c, ok := s.cp.Claims[o.uid]
		if !ok {
			if _, earlier := removed[o.uid]; !earlier {
				o.logger.V(3).Info("Claim not prepared; nothing to do")
			}
			continue
		}
		delete(s.cp.Claims, o.uid)
		removed[o.uid] = c
	}
	if len(removed) == 0 {
		finishUnprepares(ops, errs, nil)
		return
	}
	for _, o := range ops {
		c, ok := removed[o.uid]
		if !ok || errs[o] != nil {
			continue
		}
		if err := s.resetUnused(ctx, c); err != nil {
			s.cp.Claims[o.uid] = c // kept so that a retry resets the GPU
			errs[o] = err
		}
	}
	err := s.save()
	finishUnprepares(ops, errs, err)
}

// resetUnused gives each GPU of c that no recorded claim uses its default
// time slice back.
func (s *State) resetUnused(ctx context.Context, c checkpoint.Claim) error {
	for _, d := range c.Devices {
		if s.inUse(d.UUID) {
			continue
		}
		if err := s.setTimeSlice(ctx, d.UUID, string(gpuv1.DefaultTimeSlice)); err != nil {
			return err
		}
		s.recordTimeSlice(d.UUID, string(gpuv1.DefaultTimeSlice))
	}
	return nil
}

// finishUnprepares answers each op with its own error, else the write's.
func finishUnprepares(ops []*op, errs map[*op]error, saveErr error) {
	for _, o := range ops {
		err := errs[o]
		if err == nil {
			err = saveErr
		}
		if err == nil {
			o.logger.V(2).Info("Unprepared claim")
		}
		o.finish(nil, err)
	}
}

func (s *State) inUse(uuid string) bool {
	for _, c := range s.cp.Claims {
		for _, d := range c.Devices {
			if d.UUID == uuid {
				return true
			}
		}
	}
	return false
}
