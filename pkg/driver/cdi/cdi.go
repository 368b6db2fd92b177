// Package cdi writes one CDI spec per prepared claim, in the shape the NVIDIA
// container toolkit produces: the GPU's own /dev/nvidia<minor>, the control and
// UVM nodes, and NVIDIA_VISIBLE_DEVICES by UUID. Specs are named after the
// claim UID so a runtime cache never confuses two claims.
package cdi

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

const (
	// Vendor and Class make the CDI kind k8s.gpu.rota.dev/claim.
	Vendor = gpuv1.CDIVendor
	Class  = "claim"
	Kind   = Vendor + "/" + Class
)

// Device is one GPU of a claim as CDI needs it.
type Device struct {
	// Name is the device name in the pool ("gpu-3").
	Name  string
	UUID  string
	Minor int
}

// Writer writes and removes claim specs in one directory (the runtime's CDI
// directory, usually /var/run/cdi).
type Writer struct {
	dir   string
	cache *cdiapi.Cache
}

// NewWriter creates dir if needed.
func NewWriter(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating CDI directory: %w", err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("opening CDI directory %s: %w", dir, err)
	}
	return &Writer{dir: dir, cache: cache}, nil
}

// SpecName is the file name (without extension) of a claim's spec.
func SpecName(claimUID string) string {
	return cdiapi.GenerateTransientSpecName(Vendor, Class, claimUID)
}

// Path is where the claim's spec lives.
func (w *Writer) Path(claimUID string) string {
	return filepath.Join(w.dir, SpecName(claimUID)+".json")
}

// DeviceID is the fully qualified CDI device name of one GPU of a claim.
func DeviceID(claimUID, deviceName string) string {
	return Kind + "=" + cdiDeviceName(claimUID, deviceName)
}

func cdiDeviceName(claimUID, deviceName string) string { return claimUID + "-" + deviceName }

// Spec builds the claim's spec. Every device of the claim sets the same
// NVIDIA_VISIBLE_DEVICES (all of the claim's UUIDs), so injecting several of
// them into one container never yields conflicting values.
func Spec(claimUID string, devices []Device) *cdispec.Spec {
	uuids := make([]string, 0, len(devices))
	for _, d := range devices {
		uuids = append(uuids, d.UUID)
	}
	sort.Strings(uuids)
	visible := "NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")
	spec := &cdispec.Spec{
		Version: cdispec.CurrentVersion,
		Kind:    Kind,
		ContainerEdits: cdispec.ContainerEdits{
			DeviceNodes: []*cdispec.DeviceNode{
				{Path: "/dev/nvidiactl"},
				{Path: "/dev/nvidia-uvm"},
				{Path: "/dev/nvidia-uvm-tools"},
			},
		},
	}
	for _, d := range devices {
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: cdiDeviceName(claimUID, d.Name),
			ContainerEdits: cdispec.ContainerEdits{
				Env:         []string{visible},
				DeviceNodes: []*cdispec.DeviceNode{{Path: fmt.Sprintf("/dev/nvidia%d", d.Minor)}},
			},
		})
	}
	return spec
}

// Write writes (or replaces) the claim's spec atomically.
func (w *Writer) Write(claimUID string, devices []Device) error {
	if err := w.cache.WriteSpec(Spec(claimUID, devices), SpecName(claimUID)+".json"); err != nil {
		return fmt.Errorf("writing CDI spec for claim %s: %w", claimUID, err)
	}
	return nil
}

// Exists reports whether the claim's spec is on disk.
func (w *Writer) Exists(claimUID string) bool {
	_, err := os.Stat(w.Path(claimUID))
	return err == nil
}

// Remove deletes the claim's spec; a missing spec is not an error.
func (w *Writer) Remove(claimUID string) error {
	if err := w.cache.RemoveSpec(SpecName(claimUID) + ".json"); err != nil {
		return fmt.Errorf("removing CDI spec for claim %s: %w", claimUID, err)
	}
	return nil
}
