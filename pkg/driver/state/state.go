// Package state is the driver's prepare/unprepare state machine: one mutex,
// the checkpoint as the source of truth, and a fixed order of side effects so
// that a plugin killed at any point recovers on restart.
package state

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/config"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
)

// Step names the points in Prepare after each side effect. Tests inject a
// crash at each of them through Options.Hook.
type Step string

const (
	StepStarted   Step = "PrepareStartedRecorded"
	StepTimeSlice Step = "TimeSliceApplied"
	StepCDI       Step = "CDISpecWritten"
	StepCompleted Step = "PrepareCompletedRecorded"
)

// Steps in the order Prepare passes them.
var Steps = []Step{StepStarted, StepTimeSlice, StepCDI, StepCompleted}

// ErrCrash, returned by a Hook, makes Prepare stop at once without any
// cleanup, as if the process had died there.
var ErrCrash = errors.New("injected crash")

// unknownTimeSlice marks a GPU whose interval is being changed: after a crash
// the driver does not know whether the change happened and sets it again.
const unknownTimeSlice = "Unknown"

// Options configure a State.
type Options struct {
	NodeName   string
	Inventory  *gpu.Inventory
	Store      *checkpoint.Store
	CDI        *cdi.Writer
	TimeSlicer timeslice.Setter
	BootID     string
	// Hook, for tests, runs after each Step; nil in production.
	Hook func(Step) error
}

// State holds the prepared claims of one node.
type State struct {
	opts Options
	mu   sync.Mutex
	cp   *checkpoint.Checkpoint
}

// New loads the checkpoint and recovers from whatever the last process left:
// claims that never completed are rolled back (the kubelet retries them), CDI
// specs of completed claims are rebuilt if missing, and after a reboot the
// recorded GPU settings are forgotten (the GPUs are back to their defaults).
func New(ctx context.Context, opts Options) (*State, error) {
	logger := klog.FromContext(ctx)
	cp, err := opts.Store.Load(opts.BootID)
	if err != nil {
		return nil, err
	}
	s := &State{opts: opts, cp: cp}
	if cp.BootID != opts.BootID {
		logger.Info("Node rebooted since the checkpoint was written; GPU settings are back to defaults", "oldBootID", cp.BootID, "bootID", opts.BootID)
		cp.BootID = opts.BootID
		cp.TimeSlices = map[string]string{}
	}
	for uid, c := range cp.Claims {
		switch c.State {
		case checkpoint.PrepareStarted:
			logger.Info("Rolling back a claim whose prepare did not complete", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", uid)
			if err := opts.CDI.Remove(uid); err != nil {
				return nil, err
			}
			delete(cp.Claims, uid)
		case checkpoint.PrepareCompleted:
			if !opts.CDI.Exists(uid) {
				logger.Info("Rebuilding missing CDI spec", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", uid)
				if err := opts.CDI.Write(uid, cdiDevices(c.Devices)); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := opts.Store.Save(cp); err != nil {
		return nil, err
	}
	return s, nil
}

func cdiDevices(devs []checkpoint.Device) []cdi.Device {
	out := make([]cdi.Device, 0, len(devs))
	for _, d := range devs {
		out = append(out, cdi.Device{Name: d.Device, UUID: d.UUID, Minor: d.Minor})
	}
	return out
}

func (s *State) hook(step Step) error {
	if s.opts.Hook == nil {
		return nil
	}
	return s.opts.Hook(step)
}

// Claims returns a copy of the recorded claims, by UID.
func (s *State) Claims() map[string]checkpoint.Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]checkpoint.Claim, len(s.cp.Claims))
	for k, v := range s.cp.Claims {
		out[k] = v
	}
	return out
}

// currentTimeSlice is the interval the GPU runs with as far as the checkpoint
// knows: Default when nothing is recorded, Unknown while a change is in flight.
func (s *State) currentTimeSlice(uuid string) string {
	if have := s.cp.TimeSlices[uuid]; have != "" {
		return have
	}
	return string(config.DefaultTimeSlice)
}

// setTimeSlice applies want to the GPU unless it already runs with it.
func (s *State) setTimeSlice(ctx context.Context, uuid, want string) error {
	have := s.currentTimeSlice(uuid)
	if have == want {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Changing GPU time slice", "uuid", uuid, "from", have, "to", want)
	if err := s.opts.TimeSlicer.Set(ctx, uuid, config.TimeSlice(want)); err != nil {
		return fmt.Errorf("setting time slice %s on GPU %s: %w", want, uuid, err)
	}
	return nil
}

func (s *State) recordTimeSlice(uuid, ts string) {
	if ts == string(config.DefaultTimeSlice) {
		delete(s.cp.TimeSlices, uuid)
		return
	}
	s.cp.TimeSlices[uuid] = ts
}
