package state

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

// FuzzPrepare plays a sequence of prepares, unprepares and restarts of one
// node's driver state, with claims built from the fuzz input: devices that
// exist or not, other pools and drivers, shared devices, opaque configs that
// are valid, invalid or arbitrary bytes. Whatever the input, nothing panics,
// and:
//   - a refused prepare leaves no trace: the claim is not in the checkpoint
//     and has no CDI spec (unless it was prepared before);
//   - a prepared claim is in the checkpoint with its CDI spec, only on this
//     node's GPUs, and preparing it again returns the same devices;
//   - no GPU is prepared for two claims when either is exclusive, and the
//     claims sharing one GPU agree on its time slice;
//   - a restart recovers exactly the prepared claims; unprepare removes a
//     claim and its CDI spec.
//
// Run it with make fuzz FUZZ=FuzzPrepare (or go test ./pkg/driver/state
// -run '^$' -fuzz FuzzPrepare).
func FuzzPrepare(f *testing.F) {
	for _, seed := range []string{
		"", "\x00\x00\x00", "\x01\x02\x00\x01\x03\x04\x05\x00\x01\x02",
		"\x00\x01\x00\x00\x02\x01\x00\x00\x01\x00\x02\x03\x00",
		"\x02\x02\x01\x01\x01\x01\x02\x00\x00\x00\x00\x03\x01\x00\x04\x00",
		"\x00\x03\x01\x00\x01\x01\x00\x01\x02\x02\x05\x01\x00\x00\x01\x03\x00\x02\x00",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := newEnv(t, "dgx-h100")
		s := e.mustStart()
		defer func() { s.Close() }()
		ctx := context.Background()
		b := &fuzzBytes{data: data}
		claims := make([]*resourceapi.ResourceClaim, 1+b.pick(4))
		for i := range claims {
			claims[i] = fuzzClaim(b, i)
		}
		prepared := map[string][]string{} // uid -> device names returned
		for step := 0; step < 12 && len(b.data) > 0; step++ {
			c := claims[b.pick(len(claims))]
			uid := string(c.UID)
			switch b.pick(4) {
			case 0, 1:
				devs, err := s.Prepare(ctx, c)
				checkPrepare(t, e, s, c, devs, err, prepared)
			case 2:
				if err := s.Unprepare(ctx, uid, c.Namespace, c.Name); err != nil {
					t.Fatalf("Unprepare %s: %v", uid, err)
				}
				delete(prepared, uid)
				if _, ok := s.Claims()[uid]; ok || e.cdiExists(uid) {
					t.Fatalf("Unprepare %s left the claim or its CDI spec behind", uid)
				}
			case 3:
				s.Close()
				s = e.mustStart()
				if got := preparedUIDs(s); !slices.Equal(got, slices.Sorted(maps.Keys(prepared))) {
					t.Fatalf("after a restart the checkpoint holds %v, prepared were %v", got, slices.Sorted(maps.Keys(prepared)))
				}
			}
			checkSharing(t, s.Claims())
		}
	})
}

// checkPrepare checks one Prepare's outcome and records a success.
func checkPrepare(t *testing.T, e *env, s *State, c *resourceapi.ResourceClaim, devs []kubeletplugin.Device, err error, prepared map[string][]string) {
	t.Helper()
	uid := string(c.UID)
	before, wasPrepared := prepared[uid]
	if err != nil {
		if wasPrepared {
			t.Fatalf("preparing the prepared claim %s again failed: %v", uid, err)
		}
		if _, ok := s.Claims()[uid]; ok || e.cdiExists(uid) {
			t.Fatalf("refused prepare of %s (%v) left the claim or its CDI spec behind", uid, err)
		}
		return
	}
	var names []string
	for _, d := range devs {
		if d.PoolName != node {
			t.Fatalf("claim %s prepared on pool %q, this node is %q", uid, d.PoolName, node)
		}
		names = append(names, d.DeviceName)
	}
	if wasPrepared && !slices.Equal(before, names) {
		t.Fatalf("preparing %s again returned %v, first %v", uid, names, before)
	}
	cl, ok := s.Claims()[uid]
	if !ok || cl.State != checkpoint.PrepareCompleted || !e.cdiExists(uid) {
		t.Fatalf("prepared claim %s: in checkpoint %v (state %q), CDI spec %v", uid, ok, cl.State, e.cdiExists(uid))
	}
	prepared[uid] = names
}

// checkSharing: a GPU in two claims is time-sliced in both, with one interval.
func checkSharing(t *testing.T, claims map[string]checkpoint.Claim) {
	t.Helper()
	type use struct{ uid, strategy, slice string }
	byGPU := map[string][]use{}
	for uid, c := range claims {
		seen := map[string]bool{}
		for _, d := range c.Devices {
			if !seen[d.UUID] {
				byGPU[d.UUID] = append(byGPU[d.UUID], use{uid, d.Strategy, d.TimeSlice})
				seen[d.UUID] = true
			}
		}
	}
	for gpu, uses := range byGPU {
		if len(uses) < 2 {
			continue
		}
		for _, u := range uses {
			if u.strategy == string(gpuv1.Exclusive) || u.slice != uses[0].slice {
				t.Fatalf("GPU %s is prepared for %+v", gpu, uses)
			}
		}
	}
}

func preparedUIDs(s *State) []string {
	var out []string
	for uid, c := range s.Claims() {
		if c.State == checkpoint.PrepareCompleted {
			out = append(out, uid)
		}
	}
	slices.Sort(out)
	return out
}

// fuzzConfigs are opaque parameters a claim may carry: valid, invalid and
// malformed; the last entry stands for bytes taken from the input.
var fuzzConfigs = []string{
	`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig"}`,
	`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Long"}}}`,
	`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"},"memoryMiB":40960}`,
	`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"timeSlice":"Short"}},"memoryMiB":99999999}`,
	`{"apiVersion":"gpu.rota.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Exclusive","timeSlicing":{"timeSlice":"Long"}}}`,
	`{"kind":"GpuConfig"}`, `null`, `{`,
}

// fuzzClaim builds claim i of a sequence from the input.
func fuzzClaim(b *fuzzBytes, i int) *resourceapi.ResourceClaim {
	name := fmt.Sprintf("c%d", i)
	c := &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	c.Namespace, c.Name, c.UID = "ns", name, types.UID("uid-"+name)
	for range b.pick(4) {
		r := resourceapi.DeviceRequestAllocationResult{
			Request: choose(b, "gpu", "gpu/h100", "other", ""),
			Driver:  choose(b, gpuv1.DriverName, gpuv1.DriverName, "other.example.com"),
			Pool:    choose(b, node, node, node, "node-b"),
			Device:  choose(b, "gpu-0", "gpu-1", "gpu-7", "gpu-8", "GPU-0", ""),
		}
		if b.pick(3) == 0 {
			r.ShareID = ptr.To(types.UID(fmt.Sprintf("share-%d", b.pick(4))))
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{
				gpuv1.CapacityMemory: resource.MustParse(choose(b, "1Mi", "40Gi", "80Gi")),
			}
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	for range b.pick(3) {
		raw := []byte(fuzzConfigs[b.pick(len(fuzzConfigs))])
		if b.pick(4) == 0 {
			raw = b.take(b.pick(64))
		}
		c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
			Source:   choose(b, resourceapi.AllocationConfigSourceClaim, resourceapi.AllocationConfigSourceClass),
			Requests: choose(b, []string(nil), []string{"gpu"}, []string{"other"}),
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: choose(b, gpuv1.DriverName, "other.example.com"), Parameters: runtime.RawExtension{Raw: raw},
			}},
		})
	}
	return c
}

// fuzzBytes hands out fuzz bytes as small choices; exhausted, it answers 0.
type fuzzBytes struct{ data []byte }

func (b *fuzzBytes) pick(n int) int {
	if len(b.data) == 0 {
		return 0
	}
	v := int(b.data[0]) % n
	b.data = b.data[1:]
	return v
}

func (b *fuzzBytes) take(n int) []byte {
	n = min(n, len(b.data))
	out := b.data[:n]
	b.data = b.data[n:]
	return out
}

func choose[T any](b *fuzzBytes, options ...T) T { return options[b.pick(len(options))] }
