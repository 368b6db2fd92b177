package state

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/gpu/gputest"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
)

const node = "node-a"

// env is one node's driver state on disk, restartable.
type env struct {
	t      testing.TB
	dir    string
	inv    gpu.Inventory
	setter *timeslice.Recorder
	bootID string
	hook   func(Step) error
	// slicer, if set, replaces setter as the GPUs' time-slice setter.
	slicer timeslice.Setter
	// writes counts checkpoint writes of every start.
	writes atomic.Int64
}

func newEnv(t testing.TB, profile string) *env {
	t.Helper()
	_, inv := gputest.Inventory(t, node, profile, testingclock.NewFakeClock(time.Unix(0, 0)))
	return &env{t: t, dir: t.TempDir(), inv: inv, setter: &timeslice.Recorder{}, bootID: "boot-1"}
}

func (e *env) cdiDir() string { return filepath.Join(e.dir, "cdi") }

// start creates a State as a (re)started plugin would.
func (e *env) start() (*State, error) {
	_, ctx := ktesting.NewTestContext(e.t)
	store, err := checkpoint.NewStore(filepath.Join(e.dir, "plugin"))
	if err != nil {
		return nil, err
	}
	w, err := cdi.NewWriter(e.cdiDir())
	if err != nil {
		return nil, err
	}
	var slicer timeslice.Setter = e.setter
	if e.slicer != nil {
		slicer = e.slicer
	}
	return New(ctx, Options{
		NodeName: node, Inventory: &e.inv, Store: store, CDI: w, TimeSlicer: slicer, BootID: e.bootID, Hook: e.hook,
		ObserveWrite: func() { e.writes.Add(1) },
	})
}

func (e *env) mustStart() *State {
	e.t.Helper()
	s, err := e.start()
	if err != nil {
		e.t.Fatalf("starting state: %v", err)
	}
	return s
}

func (e *env) cdiExists(uid string) bool {
	w, err := cdi.NewWriter(e.cdiDir())
	if err != nil {
		e.t.Fatal(err)
	}
	return w.Exists(uid)
}

// claimOpt modifies a claim under construction.
type claimOpt func(*resourceapi.ResourceClaim)

// opaque adds a GpuConfig from the claim (or the class when fromClass).
func opaque(json string, fromClass bool, requests ...string) claimOpt {
	return func(c *resourceapi.ResourceClaim) {
		src := resourceapi.AllocationConfigSourceClaim
		if fromClass {
			src = resourceapi.AllocationConfigSourceClass
		}
		c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
			Source: src, Requests: requests,
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: gpuv1.DriverName, Parameters: runtime.RawExtension{Raw: []byte(json)},
			}},
		})
	}
}

func timeSliced(ts string) claimOpt {
	return opaque(fmt.Sprintf(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":%q}}}`, ts), false)
}

// allocated builds a claim allocated to the given devices of node-a, one
// request "gpu".
func allocated(name string, devices []string, opts ...claimOpt) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: gpuv1.DriverName, Pool: node, Device: d,
		})
	}
	for _, o := range opts {
		o(c)
	}
	return c
}
