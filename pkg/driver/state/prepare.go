package state

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

// Prepare prepares claim: it records the claim as started, applies GPU
// settings, writes the CDI spec and records completion, in that order.
// Preparing a completed claim again returns the same devices (and rewrites a
// lost CDI spec). A failed prepare leaves nothing behind.
func (s *State) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	logger := klog.FromContext(ctx).WithValues("claim", klog.KObj(claim), "claimUID", claim.UID)
	ctx = klog.NewContext(ctx, logger)
	uid := string(claim.UID)

	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if c, ok := s.cp.Claims[uid]; ok && c.State == checkpoint.PrepareCompleted {
		if !s.opts.CDI.Exists(uid) {
			if err := s.opts.CDI.Write(uid, cdiDevices(s.opts.Inventory, c.Devices)); err != nil {
				return nil, err
			}
		}
		logger.V(3).Info("Claim already prepared")
		return resultDevices(uid, c.Devices), nil
	}

	devices, err := planClaim(s.opts.NodeName, s.opts.Inventory, claim)
	if err != nil {
		return nil, err
	}
	for _, d := range devices {
		if err := conflict(s.cp, uid, d); err != nil {
			return nil, err
		}
	}

	crashed := false
	err = s.prepare(ctx, claim, devices, &crashed)
	if err != nil && !crashed {
		s.rollback(ctx, uid)
	}
	if err != nil {
		return nil, err
	}
	logger.V(2).Info("Prepared claim", "devices", len(devices))
	return resultDevices(uid, devices), nil
}

func (s *State) prepare(ctx context.Context, claim *resourceapi.ResourceClaim, devices []checkpoint.Device, crashed *bool) error {
	uid := string(claim.UID)
	step := func(st Step) error {
		if err := s.hook(st); err != nil {
			*crashed = errors.Is(err, ErrCrash)
			return err
		}
		return nil
	}
	c := checkpoint.Claim{UID: uid, Namespace: claim.Namespace, Name: claim.Name, State: checkpoint.PrepareStarted, Devices: devices}
	s.cp.Claims[uid] = c
	changing := map[string]string{}
	for _, d := range devices {
		if s.currentTimeSlice(d.UUID) != d.TimeSlice {
			changing[d.UUID] = d.TimeSlice
			s.cp.TimeSlices[d.UUID] = unknownTimeSlice
		}
	}
	if err := s.opts.Store.Save(s.cp); err != nil {
		return err
	}
	if err := step(StepStarted); err != nil {
		return err
	}
	for _, d := range devices {
		want, ok := changing[d.UUID]
		if !ok {
			continue
		}
		if err := s.opts.TimeSlicer.Set(ctx, d.UUID, timeSliceOf(want)); err != nil {
			return fmt.Errorf("setting time slice %s on %s (%s): %w", want, d.Device, d.UUID, err)
		}
		s.recordTimeSlice(d.UUID, want)
	}
	if err := step(StepTimeSlice); err != nil {
		return err
	}
	if err := s.opts.CDI.Write(uid, cdiDevices(s.opts.Inventory, devices)); err != nil {
		return err
	}
	if err := step(StepCDI); err != nil {
		return err
	}
	c.State = checkpoint.PrepareCompleted
	s.cp.Claims[uid] = c
	if err := s.opts.Store.Save(s.cp); err != nil {
		return err
	}
	return step(StepCompleted)
}

// rollback undoes a failed prepare in this process. GPU settings stay as
// recorded (a setting marked Unknown is set again by the next prepare).
func (s *State) rollback(ctx context.Context, uid string) {
	logger := klog.FromContext(ctx)
	if err := s.opts.CDI.Remove(uid); err != nil {
		logger.Error(err, "Rolling back CDI spec")
	}
	delete(s.cp.Claims, uid)
	if err := s.opts.Store.Save(s.cp); err != nil {
		logger.Error(err, "Rolling back checkpoint")
	}
}

func resultDevices(uid string, devs []checkpoint.Device) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(devs))
	for _, d := range devs {
		kd := kubeletplugin.Device{
			Requests:     d.Requests,
			PoolName:     d.Pool,
			DeviceName:   d.Device,
			CDIDeviceIDs: []string{cdi.DeviceID(uid, d.Device)},
		}
		if d.ShareID != "" {
			kd.ShareID = ptr.To(types.UID(d.ShareID))
		}
		out = append(out, kd)
	}
	return out
}
