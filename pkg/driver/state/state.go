// Package state is the driver's prepare/unprepare state machine: one lock (a
// mutex plus the node-wide checkpoint file lock), the checkpoint on disk as
// the source of truth, and a fixed order of side effects so that a plugin
// killed at any point recovers on restart.
package state

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
)

// Step names the points in Prepare after each side effect. Tests inject a
// crash at each of them through Options.Hook. StepStarted comes after the
// started record, or where it would be when the batch changes no GPU setting
// and so writes none.
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
	// Hook, for tests, runs after each Step of a batch; nil in production.
	Hook func(Step) error
	// ObserveBatch, if set, is told the number of claims of each batch
	// (see PrepareAll).
	ObserveBatch func(claims int)
	// ObserveWrite, if set, is told of each checkpoint write (one fsync of
	// the file and one of its directory).
	ObserveWrite func()
}

// State holds the prepared claims of one node.
type State struct {
	opts Options
	// mu serialises batches; whoever holds it runs the queue.
	mu sync.Mutex
	// queueMu guards queue, the prepares and unprepares waiting for a batch.
	queueMu sync.Mutex
	queue   []*op
	// cp is the checkpoint as of the last lock: valid only while mu and the
	// checkpoint lock are held.
	cp     *checkpoint.Checkpoint
	closed bool
}

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("the plugin is shutting down; retry with the other or the restarted plugin instance")

// Close waits for the prepare or unprepare in progress, if any, to finish and
// refuses later ones, so that a plugin shutting down leaves every claim either
// completed or absent in the checkpoint, never half-prepared.
func (s *State) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}

// lock takes the in-process mutex and the node-wide checkpoint lock, then
// reloads the checkpoint from disk. During a rolling update two plugin
// instances serve one node and either may prepare or unprepare any claim:
// nothing may be trusted from memory across calls, or one instance would
// overwrite a claim the other recorded (a lost claim) or miss a GPU the other
// handed out (a double prepare). On an error nothing is held.
func (s *State) lock(ctx context.Context) (unlock func(), err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	unlockFile, err := s.loadLocked(ctx)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	return func() { unlockFile(); s.mu.Unlock() }, nil
}

// loadLocked, with s.mu held, takes the checkpoint lock and reloads the
// checkpoint into s.cp. On an error the checkpoint lock is not held.
func (s *State) loadLocked(ctx context.Context) (unlockFile func(), err error) {
	unlockFile, err = s.opts.Store.Lock(ctx)
	if err != nil {
		return nil, err
	}
	cp, err := s.opts.Store.Load(s.opts.BootID)
	if err != nil {
		unlockFile()
		return nil, err
	}
	s.cp = cp
	return unlockFile, nil
}

// New loads the checkpoint and recovers from whatever the last process left
// (under the checkpoint lock, see lock):
// claims that never completed are rolled back (the kubelet retries them), CDI
// specs of completed claims are rebuilt if missing, and after a reboot the
// recorded GPU settings are forgotten (the GPUs are back to their defaults).
func New(ctx context.Context, opts Options) (*State, error) {
	logger := klog.FromContext(ctx)
	unlock, err := opts.Store.Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if n, err := opts.Store.RemoveStaleTemps(); err != nil {
		return nil, err
	} else if n > 0 {
		logger.Info("Removed the temporary files of checkpoint writes that never finished", "count", n)
	}
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
	if err := recoverClaims(ctx, opts, cp); err != nil {
		return nil, err
	}
	if err := opts.Store.Save(cp); err != nil {
		return nil, err
	}
	return s, nil
}

// recoverClaims makes the CDI directory agree with the checkpoint: claims
// that never completed leave the checkpoint, a CDI spec of a claim that is
// not recorded as completed is removed (a prepare records a claim as started
// only when it changes a GPU setting, so a spec may be the only trace of a
// prepare that died), and a completed claim's missing spec is rebuilt.
func recoverClaims(ctx context.Context, opts Options, cp *checkpoint.Checkpoint) error {
	logger := klog.FromContext(ctx)
	for uid, c := range cp.Claims {
		if c.State == checkpoint.PrepareCompleted {
			continue
		}
		logger.Info("Rolling back a claim whose prepare did not complete", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", uid)
		delete(cp.Claims, uid)
	}
	specs, err := opts.CDI.Claims()
	if err != nil {
		return err
	}
	for _, uid := range specs {
		if _, ok := cp.Claims[uid]; ok {
			continue
		}
		logger.Info("Removing the CDI spec of a claim that is not prepared", "claimUID", uid)
		if err := opts.CDI.Remove(uid); err != nil {
			return err
		}
	}
	for uid, c := range cp.Claims {
		if !opts.CDI.Exists(uid) {
			logger.Info("Rebuilding missing CDI spec", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", uid)
			if err := opts.CDI.Write(uid, cdiDevices(opts.Inventory, c.Devices)); err != nil {
				return err
			}
		}
	}
	return nil
}

// cdiDevices are the claim's GPUs for its CDI spec, each once: two requests
// of a claim may share one GPU, which is still one CDI device, whose budget
// is the sum of theirs (none if either has none). The GPU's memory comes
// from the inventory.
func cdiDevices(inv *gpu.Inventory, devs []checkpoint.Device) []cdi.Device {
	out := make([]cdi.Device, 0, len(devs))
	index := make(map[string]int, len(devs))
	for _, d := range devs {
		if i, ok := index[d.Device]; ok {
			if out[i].MemoryMiB == nil || d.MemoryMiB == nil {
				out[i].MemoryMiB = nil
			} else {
				out[i].MemoryMiB = ptr.To(*out[i].MemoryMiB + *d.MemoryMiB)
			}
			continue
		}
		index[d.Device] = len(out)
		cd := cdi.Device{Name: d.Device, UUID: d.UUID, Minor: d.Minor, MemoryMiB: d.MemoryMiB}
		if inv != nil {
			for _, g := range inv.GPUs {
				if g.UUID == d.UUID {
					cd.TotalMiB = int64(g.MemoryBytes >> 20)
				}
			}
		}
		out = append(out, cd)
	}
	return out
}

// save writes s.cp.
func (s *State) save() error {
	if err := s.opts.Store.Save(s.cp); err != nil {
		return err
	}
	if s.opts.ObserveWrite != nil {
		s.opts.ObserveWrite()
	}
	return nil
}

func (s *State) hook(step Step) error {
	if s.opts.Hook == nil {
		return nil
	}
	return s.opts.Hook(step)
}

// Claims returns a copy of the recorded claims, by UID.
// They are read from disk, so they include claims that another instance of
// the plugin prepared; when that fails, the last known claims are returned.
func (s *State) Claims() map[string]checkpoint.Claim {
	if unlock, err := s.lock(context.Background()); err == nil {
		defer unlock()
	} else {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
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
	return string(gpuv1.DefaultTimeSlice)
}

// setTimeSlice applies want to the GPU unless it already runs with it.
func (s *State) setTimeSlice(ctx context.Context, uuid, want string) error {
	have := s.currentTimeSlice(uuid)
	if have == want {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Changing GPU time slice", "uuid", uuid, "from", have, "to", want)
	if err := s.opts.TimeSlicer.Set(ctx, uuid, gpuv1.TimeSlice(want)); err != nil {
		return fmt.Errorf("setting time slice %s on GPU %s: %w", want, uuid, err)
	}
	return nil
}

func (s *State) recordTimeSlice(uuid, ts string) {
	if ts == string(gpuv1.DefaultTimeSlice) {
		delete(s.cp.TimeSlices, uuid)
		return
	}
	s.cp.TimeSlices[uuid] = ts
}
