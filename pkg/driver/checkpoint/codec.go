package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the current format version. Readers accept exactly the versions
// they know; a newer file (after a downgrade) is an error, not a guess.
const Version = 1

// ErrCorrupt marks a checkpoint that cannot be trusted. See docs/driver.md,
// "Corrupt checkpoint", for the recovery.
var ErrCorrupt = errors.New("checkpoint is corrupt")

type envelope struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Data     json.RawMessage `json:"data"`
}

// Encode serialises cp with its checksum.
func Encode(cp *Checkpoint) ([]byte, error) {
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encoding checkpoint: %w", err)
	}
	sum := sha256.Sum256(data)
	// The envelope as json.Marshal would write it, without the rescan of the
	// payload that it makes for a RawMessage; compact, as indenting would make
	// every write and read of a large checkpoint rescan it (jq shows it
	// indented).
	out := make([]byte, 0, len(data)+128)
	out = fmt.Appendf(out, `{"version":%d,"checksum":"%s","data":`, Version, hex.EncodeToString(sum[:]))
	out = append(out, data...)
	return append(out, "}\n"...), nil
}

// Decode parses and verifies a checkpoint. Unknown payload fields are
// tolerated (a newer patch release may add some), a wrong checksum, an unknown
// version or an inconsistent payload are ErrCorrupt.
func Decode(raw []byte) (*Checkpoint, error) {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if env.Version != Version {
		return nil, fmt.Errorf("%w: version %d, this driver reads version %d", ErrCorrupt, env.Version, Version)
	}
	// The checksum covers the compact payload. Files this version writes hold
	// it as it was summed; older ones indented it with the envelope.
	payload := []byte(env.Data)
	if !checksumMatches(payload, env.Checksum) {
		var compact bytes.Buffer
		if err := json.Compact(&compact, payload); err != nil {
			return nil, fmt.Errorf("%w: payload: %w", ErrCorrupt, err)
		}
		payload = compact.Bytes()
		if !checksumMatches(payload, env.Checksum) {
			return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
		}
	}
	var cp Checkpoint
	if err := json.Unmarshal(payload, &cp); err != nil {
		return nil, fmt.Errorf("%w: payload: %w", ErrCorrupt, err)
	}
	if err := cp.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if cp.Claims == nil {
		cp.Claims = map[string]Claim{}
	}
	if cp.TimeSlices == nil {
		cp.TimeSlices = map[string]string{}
	}
	return &cp, nil
}

func checksumMatches(payload []byte, checksum string) bool {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:]) == checksum
}

// check verifies what the checksum cannot: that the payload makes sense.
func (cp *Checkpoint) check() error {
	for uid, c := range cp.Claims {
		if uid == "" || c.UID != uid {
			return fmt.Errorf("claim %q is recorded under key %q", c.UID, uid)
		}
		if c.State != PrepareStarted && c.State != PrepareCompleted {
			return fmt.Errorf("claim %s has unknown state %q", uid, c.State)
		}
		for _, d := range c.Devices {
			if d.UUID == "" || d.Device == "" {
				return fmt.Errorf("claim %s has a device without name or UUID", uid)
			}
		}
	}
	return nil
}
