package state

import (
	"context"

	"k8s.io/klog/v2"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

func timeSliceOf(s string) gpuv1.TimeSlice { return gpuv1.TimeSlice(s) }

// Unprepare undoes Prepare: the CDI spec goes, a GPU that no other claim uses
// gets its default time slice back, and the claim leaves the checkpoint.
// Unpreparing an unknown claim succeeds (and removes a stray CDI spec).
func (s *State) Unprepare(ctx context.Context, uid, namespace, name string) error {
	logger := klog.FromContext(ctx).WithValues("claim", klog.KRef(namespace, name), "claimUID", uid)
	ctx = klog.NewContext(ctx, logger)

	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()

	if err := s.opts.CDI.Remove(uid); err != nil {
		return err
	}
	c, ok := s.cp.Claims[uid]
	if !ok {
		logger.V(3).Info("Claim not prepared; nothing to do")
		return nil
	}
	delete(s.cp.Claims, uid)
	for _, d := range c.Devices {
		if s.inUse(d.UUID) {
			continue
		}
		if err := s.setTimeSlice(ctx, d.UUID, string(gpuv1.DefaultTimeSlice)); err != nil {
			s.cp.Claims[uid] = c // keep it so that a retry resets the GPU
			return err
		}
		s.recordTimeSlice(d.UUID, string(gpuv1.DefaultTimeSlice))
	}
	if err := s.opts.Store.Save(s.cp); err != nil {
		s.cp.Claims[uid] = c
		return err
	}
	logger.V(2).Info("Unprepared claim")
	return nil
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
