package state

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// op is one prepare (claim set) or unprepare (claim nil) waiting for a batch.
type op struct {
	claim                *resourceapi.ResourceClaim
	uid, namespace, name string
	logger               klog.Logger
	// done receives the result exactly once; buffered so that the batch
	// never waits for the caller.
	done chan opResult
}

type opResult struct {
	devices []kubeletplugin.Device
	err     error
}

func (o *op) finish(devices []kubeletplugin.Device, err error) {
	o.done <- opResult{devices: devices, err: err}
}

// PrepareAll prepares claims, each succeeding or failing on its own, and
// returns one result per claim in their order.
//
// Concurrent calls share checkpoint writes (group commit): calls queue their
// claims, and whichever caller takes the state's lock runs every queued
// claim, its own and the others', as one batch: one fsynced write records
// them all as started, one records them all as completed. A claim is
// reported prepared only after the write that records its completion is
// durable, exactly as when claims ran one at a time; the batch only changes
// how many claims one write covers.
func (s *State) PrepareAll(ctx context.Context, claims []*resourceapi.ResourceClaim) []PrepareResult {
	ops := make([]*op, len(claims))
	logger := klog.FromContext(ctx)
	for i, c := range claims {
		ops[i] = &op{
			claim: c, uid: string(c.UID), namespace: c.Namespace, name: c.Name,
			logger: logger.WithValues("claim", klog.KObj(c), "claimUID", c.UID),
			done:   make(chan opResult, 1),
		}
	}
	s.submit(ctx, ops)
	out := make([]PrepareResult, len(ops))
	for i, o := range ops {
		r := <-o.done
		out[i] = PrepareResult{Devices: r.devices, Err: r.err}
	}
	return out
}

// PrepareResult is one claim's outcome of PrepareAll.
type PrepareResult struct {
	Devices []kubeletplugin.Device
	Err     error
}

// ClaimRef names a claim to unprepare.
type ClaimRef struct {
	UID, Namespace, Name string
}

// UnprepareAll unprepares claims, sharing checkpoint writes with concurrent
// calls as PrepareAll does, and returns one error (or nil) per claim.
func (s *State) UnprepareAll(ctx context.Context, claims []ClaimRef) []error {
	ops := make([]*op, len(claims))
	logger := klog.FromContext(ctx)
	for i, c := range claims {
		ops[i] = &op{
			uid: c.UID, namespace: c.Namespace, name: c.Name,
			logger: logger.WithValues("claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID),
			done:   make(chan opResult, 1),
		}
	}
	s.submit(ctx, ops)
	out := make([]error, len(ops))
	for i, o := range ops {
		out[i] = (<-o.done).err
	}
	return out
}

// Prepare prepares one claim (see PrepareAll).
func (s *State) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	r := s.PrepareAll(ctx, []*resourceapi.ResourceClaim{claim})[0]
	return r.Devices, r.Err
}

// Unprepare unprepares one claim (see UnprepareAll).
func (s *State) Unprepare(ctx context.Context, uid, namespace, name string) error {
	return s.UnprepareAll(ctx, []ClaimRef{{UID: uid, Namespace: namespace, Name: name}})[0]
}

// submit queues ops and returns once each has its result. The caller that
// gets the state's mutex runs everything queued by then; a caller whose ops
// an earlier batch already ran finds the queue without them and returns.
// Ops are queued before the mutex is requested and only taken from the queue
// by a mutex holder that finishes them before unlocking, so every op is run
// by exactly one batch.
func (s *State) submit(ctx context.Context, ops []*op) {
	s.queueMu.Lock()
	s.queue = append(s.queue, ops...)
	s.queueMu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.queueMu.Lock()
	batch := s.queue
	s.queue = nil
	s.queueMu.Unlock()
	if len(batch) > 0 {
		s.runBatch(ctx, batch)
	}
}

// runBatch runs ops with s.mu held: it takes the node-wide checkpoint lock
// and reloads the checkpoint (see lock), then unprepares and prepares.
// The lock is waited for with the caller's ctx; the side effects run to the
// end even if that caller gives up, since other callers' claims are in the
// batch too.
func (s *State) runBatch(ctx context.Context, ops []*op) {
	fail := func(err error) {
		for _, o := range ops {
			o.finish(nil, err)
		}
	}
	if s.closed {
		fail(ErrClosed)
		return
	}
	unlockFile, err := s.loadLocked(ctx)
	if err != nil {
		fail(err)
		return
	}
	defer unlockFile()
	ctx = context.WithoutCancel(ctx)
	if s.opts.ObserveBatch != nil {
		s.opts.ObserveBatch(len(ops))
	}
	for _, run := range runsOfOneKind(ops) {
		if run[0].claim == nil {
			s.unprepareBatch(ctx, run)
		} else {
			s.prepareBatch(ctx, run)
		}
	}
}

// runsOfOneKind splits ops, in arrival order, into runs of prepares and runs
// of unprepares. Runs execute in order, so an unprepare queued after a
// prepare of the same claim sees that prepare done, as it would one call at a
// time; each run shares its checkpoint writes.
func runsOfOneKind(ops []*op) [][]*op {
	var runs [][]*op
	for i, o := range ops {
		if i == 0 || (o.claim == nil) != (ops[i-1].claim == nil) {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], o)
	}
	return runs
}
