package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// LockFileName is the lock that serialises every reader-modifier-writer of
// the checkpoint on a node, across processes.
const LockFileName = "checkpoint.lock"

// lockRetry is how often a waiting Lock tries again.
const lockRetry = 5 * time.Millisecond

// Lock takes the node-wide checkpoint lock: an exclusive flock(2) on
// checkpoint.lock next to the checkpoint. Two plugin instances of one node
// (the old and the new pod of a rolling update) share the checkpoint through
// it: each loads, changes and saves the checkpoint while holding the lock, so
// neither overwrites what the other wrote. The kernel drops the lock when its
// holder dies, so a killed plugin never blocks the next one. Flock locks
// belong to an open file, so two instances in one process exclude each other
// too. Lock waits until the lock is free or ctx ends; call unlock exactly once.
func (s *Store) Lock(ctx context.Context) (unlock func(), err error) {
	path := filepath.Join(filepath.Dir(s.path), LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening checkpoint lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("locking checkpoint %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for checkpoint lock %s: %w", path, context.Cause(ctx))
		case <-time.After(lockRetry):
		}
	}
}
