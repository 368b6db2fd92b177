package state

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/cdi"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
)

// The tests in this file play what the allocator does with GPUs published
// with consumable memory (resources.Options.ConsumableMemory): several claims
// get one GPU, each result with its own share ID and the memory it consumed.

// share marks every result of the claim as a share of its GPU that consumed
// consumedMiB of its memory.
func share(consumedMiB int64) claimOpt {
	return func(c *resourceapi.ResourceClaim) {
		for i := range c.Status.Allocation.Devices.Results {
			r := &c.Status.Allocation.Devices.Results[i]
			r.ShareID = ptr.To(types.UID(fmt.Sprintf("%s-share-%d", c.Name, i)))
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{
				"memory": *resource.NewQuantity(consumedMiB<<20, resource.BinarySI),
			}
		}
	}
}

// member is a time-sliced claim with a memoryMiB, as a reservation member's.
func member(ts string, memoryMiB int64) claimOpt {
	return opaque(fmt.Sprintf(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":%q}},"memoryMiB":%d}`, ts, memoryMiB), false)
}

// TestTimeSlicedSharesOfOneGPU: three members of a reservation share gpu-0,
// each prepared with its share ID; the interval is set once for the first
// and reset once after the last; an exclusive claim the allocator placed
// beside them (it asked for a little memory) is refused, before and after a
// restart from the checkpoint; the GPU is exclusive again once all are gone.
func TestTimeSlicedSharesOfOneGPU(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "hgx-h200")
	s := e.mustStart()
	uuid := e.inv.GPUs[0].UUID
	members := map[string]int64{"a": 40960, "b": 61440, "c": 30720}
	for _, name := range []string{"a", "b", "c"} {
		got, err := s.Prepare(ctx, allocated(name, []string{"gpu-0"}, member("Medium", members[name]), share(members[name])))
		if err != nil {
			t.Fatalf("prepare member %s: %v", name, err)
		}
		if len(got) != 1 || got[0].ShareID == nil || *got[0].ShareID != types.UID(name+"-share-0") {
			t.Errorf("member %s: prepared devices %+v, want gpu-0 with share ID %s-share-0", name, got, name)
		}
		if !e.cdiExists("uid-" + name) {
			t.Errorf("member %s: no CDI spec", name)
		}
	}
	if got := claimUIDs(s); got != "uid-a uid-b uid-c" {
		t.Errorf("checkpoint claims = %q", got)
	}
	if c := s.Claims()["uid-b"]; len(c.Devices) != 1 || c.Devices[0].ShareID != "b-share-0" || *c.Devices[0].MemoryMiB != 61440 {
		t.Errorf("checkpoint of member b = %+v, want share ID and memoryMiB", c)
	}
	wantCalls := []timeslice.Call{{UUID: uuid, TimeSlice: gpuv1.MediumTimeSlice}}
	if diff := cmp.Diff(wantCalls, e.setter.Calls()); diff != "" {
		t.Errorf("time-slice calls after three members (-want +got):\n%s", diff)
	}

	intruder := allocated("x", []string{"gpu-0"}, share(1024))
	for _, phase := range []string{"before restart", "after restart"} {
		if _, err := s.Prepare(ctx, intruder); err == nil || !strings.Contains(err.Error(), "an exclusive claim needs it alone") {
			t.Errorf("%s: exclusive claim beside time-sliced members = %v", phase, err)
		}
		if _, err := s.Prepare(ctx, allocated("long", []string{"gpu-0"}, member("Long", 1024), share(1024))); err == nil ||
			!strings.Contains(err.Error(), "runs with time slice Medium") {
			t.Errorf("%s: member with another interval = %v", phase, err)
		}
		s = e.mustStart()
	}
	// A member prepared by the restarted plugin joins without a new setting.
	if _, err := s.Prepare(ctx, allocated("d", []string{"gpu-0"}, member("Medium", 2048), share(2048))); err != nil {
		t.Fatalf("member d after restart: %v", err)
	}
	if n := len(e.setter.Calls()); n != 1 {
		t.Errorf("%d time-slice calls, want still 1: %v", n, e.setter.Calls())
	}

	for _, name := range []string{"a", "b", "c"} {
		if err := s.Unprepare(ctx, "uid-"+name, "ns", name); err != nil {
			t.Fatalf("unprepare %s: %v", name, err)
		}
		if n := len(e.setter.Calls()); n != 1 {
			t.Errorf("after unpreparing %s: GPU reset while member d still runs: %v", name, e.setter.Calls())
		}
	}
	if err := s.Unprepare(ctx, "uid-d", "ns", "d"); err != nil {
		t.Fatal(err)
	}
	wantCalls = append(wantCalls, timeslice.Call{UUID: uuid, TimeSlice: gpuv1.DefaultTimeSlice})
	if diff := cmp.Diff(wantCalls, e.setter.Calls()); diff != "" {
		t.Errorf("time-slice calls after the last member left (-want +got):\n%s", diff)
	}
	if _, err := s.Prepare(ctx, intruder); err != nil {
		t.Errorf("exclusive claim on the GPU nobody shares any more: %v", err)
	}
}

// TestConsumableAllocationChecks covers what only a GPU published with
// consumable memory can produce.
func TestConsumableAllocationChecks(t *testing.T) {
	twoRequests := func(c *resourceapi.ResourceClaim) {
		r := c.Status.Allocation.Devices.Results[0]
		r.Request = "second"
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	exclusiveSecond := opaque(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Exclusive"}}`, false, "second")
	longSecond := opaque(`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Long"}}}`, false, "second")
	tests := map[string]struct {
		opts    []claimOpt
		wantErr string
		// wantCDI is the number of CDI devices of a prepared claim.
		wantCDI int
	}{
		"memoryMiB within what was consumed": {opts: []claimOpt{member("Default", 40960), share(40960)}, wantCDI: 1},
		"memoryMiB without a capacity request (whole GPU consumed)": {
			opts: []claimOpt{member("Default", 40960), share(143771)}, wantCDI: 1,
		},
		"memoryMiB above what was consumed": {
			opts:    []claimOpt{member("Default", 40960), share(1024)},
			wantErr: `memoryMiB 40960 is more than the 1024 MiB of gpu-0 the allocation consumed; ask for it with capacity.requests.memory: 40960Mi`,
		},
		"two time-sliced requests of one claim on one GPU": {
			opts: []claimOpt{twoRequests, timeSliced("Default"), share(1024)}, wantCDI: 1,
		},
		"an exclusive request beside a time-sliced one on one GPU": {
			opts:    []claimOpt{twoRequests, timeSliced("Default"), exclusiveSecond, share(1024)},
			wantErr: `is allocated to requests "gpu" and "second" of this claim, and an exclusive request needs it alone`,
		},
		"two intervals in one claim on one GPU": {
			opts:    []claimOpt{twoRequests, timeSliced("Default"), longSecond, share(1024)},
			wantErr: `requests "gpu" (time slice Default) and "second" (time slice Long) of this claim`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newEnv(t, "hgx-h200")
			s := e.mustStart()
			claim := allocated("a", []string{"gpu-0"}, tc.opts...)
			got, err := s.Prepare(ctx, claim)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Prepare = %v, want an error containing %q", err, tc.wantErr)
				}
				if len(s.Claims()) != 0 || e.cdiExists("uid-a") {
					t.Error("a refused claim left state behind")
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if len(got) != len(claim.Status.Allocation.Devices.Results) {
				t.Errorf("prepared %d devices, want one per allocation result", len(got))
			}
			w := cdiSpec(t, e, "uid-a")
			if len(w.Devices) != tc.wantCDI {
				t.Errorf("CDI spec has %d devices, want %d", len(w.Devices), tc.wantCDI)
			}
		})
	}
}

func cdiSpec(t *testing.T, e *env, uid string) cdispec.Spec {
	t.Helper()
	w, err := cdi.NewWriter(e.cdiDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(w.Path(uid))
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestConsumableAllocationIgnoresOtherDrivers: results of another driver are
// not this driver's business, even with share IDs.
func TestConsumableAllocationIgnoresOtherDrivers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "hgx-h200")
	s := e.mustStart()
	claim := allocated("a", []string{"gpu-0"}, share(1024), timeSliced("Default"))
	claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
		Request: "nic", Driver: "nic.example.com", Pool: node, Device: "nic-0", ShareID: ptr.To(types.UID("other")),
	})
	got, err := s.Prepare(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].PoolName != node || got[0].DeviceName != "gpu-0" || got[0].Requests[0] != "gpu" {
		t.Errorf("prepared %+v, want only gpu-0", got)
	}
}
