package state

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

// pending is a claim of a prepare batch that passed planning: recorded as
// started, waiting for its side effects. dups are later calls for the same
// claim in the batch; they get its result.
type pending struct {
	op      *op
	dups    []*op
	devices []checkpoint.Device
	err     error
}

func (p *pending) finish(devices []kubeletplugin.Device, err error) {
	p.op.finish(devices, err)
	for _, d := range p.dups {
		d.finish(devices, err)
	}
}

// prepareBatch prepares a run of claims with the state locked. Each claim
// goes through the steps of a single prepare: recorded as started, GPU
// settings applied, CDI spec written, recorded as completed. Each record is
// one fsynced checkpoint write for the whole batch, and the started record is
// written only when a claim of the batch changes a GPU's interval: that
// change must be known to be in flight (Unknown) before it is made. Without
// it, a prepare that dies leaves at most a CDI spec of a claim the
// checkpoint does not hold, which the next start removes (recoverClaims).
// Preparing a
// completed claim again returns the same devices (and rewrites a lost CDI
// spec). A claim that fails leaves nothing behind, and does not fail the
// others, unless a checkpoint write fails, which fails every claim the write
// was to record.
func (s *State) prepareBatch(ctx context.Context, ops []*op) {
	started, changing := s.recordStarted(ops)
	if len(started) == 0 {
		return
	}
	if changing {
		if err := s.save(); err != nil {
			for _, p := range started {
				p.finish(nil, err)
			}
			return
		}
	}
	if s.stopAt(ctx, StepStarted, started) {
		return
	}
	s.applyTimeSlices(ctx, started)
	if s.stopAt(ctx, StepTimeSlice, started) {
		return
	}
	for _, p := range live(started) {
		if err := s.opts.CDI.Write(p.op.uid, cdiDevices(s.opts.Inventory, p.devices)); err != nil {
			p.err = err
		}
	}
	if s.stopAt(ctx, StepCDI, started) {
		return
	}
	s.recordCompleted(ctx, started)
}

// recordStarted plans each claim and records the ones that can go ahead as
// started in s.cp (not yet written). Claims are planned in order against the
// checkpoint including the earlier claims of the batch, so two claims of a
// batch conflict exactly as they would one after the other.
// changing tells whether a GPU's interval is to change (marked Unknown).
func (s *State) recordStarted(ops []*op) (started []*pending, changing bool) {
	byUID := map[string]*pending{}
	for _, o := range ops {
		if p, ok := byUID[o.uid]; ok {
			p.dups = append(p.dups, o)
			continue
		}
		if c, ok := s.cp.Claims[o.uid]; ok && c.State == checkpoint.PrepareCompleted {
			s.finishPrepared(o, c)
			continue
		}
		devices, err := planClaim(s.opts.NodeName, s.opts.Inventory, o.claim)
		for i := 0; err == nil && i < len(devices); i++ {
			err = conflict(s.cp, o.uid, devices[i])
		}
		if err != nil {
			o.finish(nil, err)
			continue
		}
		p := &pending{op: o, devices: devices}
		byUID[o.uid] = p
		started = append(started, p)
		s.cp.Claims[o.uid] = checkpoint.Claim{UID: o.uid, Namespace: o.namespace, Name: o.name, State: checkpoint.PrepareStarted, Devices: devices}
		for _, d := range devices {
			if have := s.currentTimeSlice(d.UUID); have != d.TimeSlice {
				s.cp.TimeSlices[d.UUID] = unknownTimeSlice
				changing = true
			}
		}
	}
	return started, changing
}

// finishPrepared answers a prepare of a claim that is already prepared.
func (s *State) finishPrepared(o *op, c checkpoint.Claim) {
	if !s.opts.CDI.Exists(o.uid) {
		if err := s.opts.CDI.Write(o.uid, cdiDevices(s.opts.Inventory, c.Devices)); err != nil {
			o.finish(nil, err)
			return
		}
	}
	o.logger.V(3).Info("Claim already prepared")
	o.finish(resultDevices(o.uid, c.Devices), nil)
}

// applyTimeSlices sets each GPU whose interval is marked Unknown to the one
// its claims of this batch ask for, once per GPU. A GPU that cannot be set
// fails the claims that needed it.
func (s *State) applyTimeSlices(ctx context.Context, started []*pending) {
	done := map[string]error{}
	for _, p := range started {
		for _, d := range p.devices {
			if s.cp.TimeSlices[d.UUID] != unknownTimeSlice {
				continue
			}
			err, tried := done[d.UUID]
			if !tried {
				p.op.logger.V(2).Info("Changing GPU time slice", "uuid", d.UUID, "to", d.TimeSlice)
				err = s.opts.TimeSlicer.Set(ctx, d.UUID, timeSliceOf(d.TimeSlice))
				if err != nil {
					err = fmt.Errorf("setting time slice %s on %s (%s): %w", d.TimeSlice, d.Device, d.UUID, err)
				}
				done[d.UUID] = err
			}
			if err != nil && p.err == nil {
				p.err = err
			}
		}
	}
	for uuid, err := range done {
		if err == nil {
			s.recordTimeSlice(uuid, timeSliceWanted(started, uuid))
		}
	}
}

// timeSliceWanted is the interval the batch's claims want on a GPU (the
// planning made them agree).
func timeSliceWanted(started []*pending, uuid string) string {
	for _, p := range started {
		for _, d := range p.devices {
			if d.UUID == uuid {
				return d.TimeSlice
			}
		}
	}
	return unknownTimeSlice
}

// recordCompleted rolls back the claims that failed, records the others as
// completed in one write, and answers every claim of the batch.
func (s *State) recordCompleted(ctx context.Context, started []*pending) {
	for _, p := range started {
		if p.err != nil {
			s.forget(ctx, p)
			continue
		}
		c := s.cp.Claims[p.op.uid]
		c.State = checkpoint.PrepareCompleted
		s.cp.Claims[p.op.uid] = c
	}
	if err := s.save(); err != nil {
		for _, p := range live(started) {
			p.err = err
			s.forget(ctx, p)
		}
		if err := s.save(); err != nil {
			klog.FromContext(ctx).Error(err, "Rolling back checkpoint")
		}
	}
	crash := s.hook(StepCompleted)
	for _, p := range started {
		switch {
		case p.err != nil:
			p.finish(nil, p.err)
		case crash != nil:
			p.finish(nil, crash)
		default:
			p.op.logger.V(2).Info("Prepared claim", "devices", len(p.devices))
			p.finish(resultDevices(p.op.uid, p.devices), nil)
		}
	}
}

// stopAt runs the hook after step. An injected crash (ErrCrash) answers every
// claim with it and leaves everything as it is, as if the process had died;
// another error rolls the live claims back.
func (s *State) stopAt(ctx context.Context, step Step, started []*pending) bool {
	err := s.hook(step)
	if err == nil {
		return false
	}
	if !errors.Is(err, ErrCrash) {
		for _, p := range live(started) {
			s.forget(ctx, p)
		}
		if err := s.save(); err != nil {
			klog.FromContext(ctx).Error(err, "Rolling back checkpoint")
		}
	}
	for _, p := range started {
		p.finish(nil, err)
	}
	return true
}

// forget undoes a failed prepare in memory (the caller writes the checkpoint):
// its CDI spec goes and the claim leaves the checkpoint. GPU settings stay as
// recorded (a setting marked Unknown is set again by the next prepare).
func (s *State) forget(ctx context.Context, p *pending) {
	if err := s.opts.CDI.Remove(p.op.uid); err != nil {
		p.op.logger.Error(err, "Rolling back CDI spec")
	}
	delete(s.cp.Claims, p.op.uid)
}

func live(started []*pending) []*pending {
	return slices.DeleteFunc(slices.Clone(started), func(p *pending) bool { return p.err != nil })
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
