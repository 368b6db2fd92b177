// Package checkpoint records which claims the driver prepared, on which GPUs
// and with which settings, so that a restarted plugin unprepares correctly,
// rebuilds lost CDI specs and never hands one GPU to two exclusive claims.
//
// The format is the driver's own (never kubeletplugin types, whose new
// upstream fields would change the bytes and the checksum): a versioned
// envelope with a SHA-256 of the payload, written atomically.
package checkpoint

import (
	"maps"
	"slices"

	"k8s.io/utils/ptr"
)

// ClaimState is where a claim is in prepare. A claim is recorded as
// PrepareStarted before anything touches the GPU or the CDI directory, and as
// PrepareCompleted after the last side effect. A restarted plugin rolls back
// PrepareStarted claims (the kubelet retries them) and keeps completed ones.
type ClaimState string

const (
	PrepareStarted   ClaimState = "PrepareStarted"
	PrepareCompleted ClaimState = "PrepareCompleted"
)

// Checkpoint is the payload.
type Checkpoint struct {
	// BootID is the node's boot ID when the checkpoint was written; after a
	// reboot GPU settings are back to their defaults and CDI specs (in tmpfs)
	// are gone.
	BootID string `json:"bootID"`
	// Claims by claim UID.
	Claims map[string]Claim `json:"claims,omitempty"`
	// TimeSlices is the time-slice interval the driver last set per GPU UUID
	// in this boot; a GPU that is absent runs with Default.
	TimeSlices map[string]string `json:"timeSlices,omitempty"`
}

// Claim is one prepared (or being prepared) claim.
type Claim struct {
	UID       string     `json:"uid"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	State     ClaimState `json:"state"`
	Devices   []Device   `json:"devices"`
}

// Device is one GPU of a claim with the configuration it was prepared with.
type Device struct {
	// Requests are the claim's request names this device serves.
	Requests []string `json:"requests,omitempty"`
	Pool     string   `json:"pool"`
	Device   string   `json:"device"`
	UUID     string   `json:"uuid"`
	Minor    int      `json:"minor"`
	// ShareID identifies the claim's share of a GPU that several claims
	// may be allocated (consumable memory); empty otherwise.
	ShareID string `json:"shareID,omitempty"`
	// Strategy and TimeSlice are the effective GpuConfig sharing settings.
	Strategy  string `json:"strategy"`
	TimeSlice string `json:"timeSlice,omitempty"`
	MemoryMiB *int64 `json:"memoryMiB,omitempty"`
}

// New is an empty checkpoint for the current boot.
func New(bootID string) *Checkpoint {
	return &Checkpoint{BootID: bootID, Claims: map[string]Claim{}, TimeSlices: map[string]string{}}
}

// Clone is a deep copy of cp: changing either never changes the other.
func (cp *Checkpoint) Clone() *Checkpoint {
	out := &Checkpoint{BootID: cp.BootID}
	if cp.Claims != nil {
		out.Claims = make(map[string]Claim, len(cp.Claims))
		for uid, c := range cp.Claims {
			out.Claims[uid] = c.clone()
		}
	}
	if cp.TimeSlices != nil {
		out.TimeSlices = maps.Clone(cp.TimeSlices)
	}
	return out
}

func (c Claim) clone() Claim {
	if c.Devices != nil {
		devs := make([]Device, len(c.Devices))
		for i, d := range c.Devices {
			d.Requests = slices.Clone(d.Requests)
			if d.MemoryMiB != nil {
				d.MemoryMiB = ptr.To(*d.MemoryMiB)
			}
			devs[i] = d
		}
		c.Devices = devs
	}
	return c
}
