package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// FileName is the checkpoint's name inside the plugin's data directory.
const FileName = "checkpoint.json"

// BootIDPath is where Linux publishes the boot ID.
const BootIDPath = "/proc/sys/kernel/random/boot_id"

// Store reads and writes the checkpoint file.
type Store struct {
	path string

	// mu guards lastRaw and last: the file's bytes as this Store last wrote
	// or read them, and a private copy of their decoding. A Load that finds
	// those same bytes returns a copy of last instead of decoding the file
	// again; a file any other writer changed has other bytes and is decoded.
	mu      sync.Mutex
	lastRaw []byte
	last    *Checkpoint
}

// NewStore uses dir/checkpoint.json, creating dir if needed.
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating checkpoint directory: %w", err)
	}
	return &Store{path: filepath.Join(dir, FileName)}, nil
}

// Path of the checkpoint file.
func (s *Store) Path() string { return s.path }

// Load reads the checkpoint; a missing file is an empty checkpoint for bootID.
// A corrupt file is an error wrapping ErrCorrupt that says how to recover.
// The caller owns the result: it may change it freely. Load reads the file
// every time, but decodes it only when its bytes differ from those this Store
// last wrote or read (the checksum and the payload checks ran on those).
func (s *Store) Load(bootID string) (*Checkpoint, error) {
	raw, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return New(bootID), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && bytes.Equal(raw, s.lastRaw) {
		return s.last.Clone(), nil
	}
	cp, err := Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; the driver will not start because it cannot tell which GPUs are in use. "+
			"To recover: make sure no pod on this node still uses a %s claim (drain it), "+
			"move the file away (mv %s %s.bad) and restart the plugin", s.path, err, gpuv1.DriverName, s.path, s.path)
	}
	s.lastRaw, s.last = raw, cp.Clone()
	return cp, nil
}

// Save writes cp atomically: a temporary file in the same directory, fsync,
// rename over the old file, fsync of the directory. A crash leaves either the
// old or the new checkpoint, never a mix. After a failed Save, Load still
// returns what the file holds: the old checkpoint, or the new one if only
// the directory's fsync failed.
func (s *Store) Save(cp *Checkpoint) error {
	data, err := Encode(cp)
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, FileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("syncing checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("replacing checkpoint: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing checkpoint directory: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing checkpoint directory: %w", err)
	}
	s.mu.Lock()
	s.lastRaw, s.last = data, cp.Clone()
	s.mu.Unlock()
	return nil
}

// RemoveStaleTemps removes the temporary files of Saves that never finished:
// a plugin killed between creating its temporary file and renaming it leaves
// the file behind (the checkpoint itself is untouched). Call it only with the
// checkpoint lock held (Lock): every Save runs under that lock, so no
// temporary file is then being written. It returns how many it removed.
func (s *Store) RemoveStaleTemps() (int, error) {
	stale, err := filepath.Glob(filepath.Join(filepath.Dir(s.path), FileName+".tmp-*"))
	if err != nil {
		return 0, fmt.Errorf("listing stale checkpoint files: %w", err)
	}
	removed := 0
	for _, f := range stale {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("removing stale checkpoint file: %w", err)
		}
		removed++
	}
	return removed, nil
}

// ReadBootID reads the node's boot ID from path (BootIDPath in production).
func ReadBootID(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading boot ID: %w", err)
	}
	return strings.TrimSpace(string(raw)), nil
}
