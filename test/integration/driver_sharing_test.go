package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/timeslice"
	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

const (
	sharingNode = "h200-0"
	sharingNS   = "serving"
	// h200MiB is what the mock (like a real H200 141GB) reports.
	h200MiB = 143771
)

// shareClaim is a claim for one GPU, narrowed by cel. memoryMiB > 0 asks
// for that much memory (capacity.requests.memory); timeSlice != "" makes it
// time-sliced with that interval and declares memoryMiB in its GpuConfig.
func shareClaim(name string, memoryMiB int64, timeSlice string, cel ...string) *resourceapi.ResourceClaim {
	req := &resourceapi.ExactDeviceRequest{
		DeviceClassName: gpuv1.DeviceClassName,
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           1,
	}
	for _, e := range cel {
		req.Selectors = append(req.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	if memoryMiB > 0 {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			"memory": *resource.NewQuantity(memoryMiB<<20, resource.BinarySI),
		}}
	}
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: sharingNS, Name: name},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}},
	}
	if timeSlice != "" {
		cfg := gpuv1.GpuConfig{
			TypeMeta: metav1.TypeMeta{APIVersion: gpuv1.APIVersion, Kind: gpuv1.Kind},
			Sharing: &gpuv1.Sharing{Strategy: gpuv1.TimeSlicing,
				TimeSlicing: &gpuv1.TimeSlicingConfig{TimeSlice: gpuv1.TimeSlice(timeSlice)}},
		}
		if memoryMiB > 0 {
			cfg.MemoryMiB = ptr.To(memoryMiB)
		}
		raw, err := json.Marshal(cfg)
		if err != nil {
			panic(err) // a GpuConfig always encodes
		}
		c.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: gpuv1.DriverName, Parameters: runtime.RawExtension{Raw: raw}},
		}}}
	}
	return c
}

// sharePod is a pod for Rota's scheduler that uses claim c.
func sharePod(c *resourceapi.ResourceClaim) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Spec: v1.PodSpec{
			SchedulerName:  scheduler.ProfileName,
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(c.Name)}},
			Containers: []v1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
}

// scheduleShare creates the claim and its pod, waits until the scheduler bound
// the pod, and returns the allocated claim.
func scheduleShare(t *testing.T, cp *framework.ControlPlane, c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	t.Helper()
	cp.Create(t, c, sharePod(c))
	cp.WaitForPodBound(t, sharingNS, c.Name)
	var got *resourceapi.ResourceClaim
	framework.WaitFor(t, "claim "+c.Name+" to be allocated", func(ctx context.Context) (bool, string, error) {
		var err error
		got, err = cp.Client.ResourceV1().ResourceClaims(sharingNS).Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return got.Status.Allocation != nil, "not allocated", nil
	})
	return got
}

// onlyResult is the claim's one allocation result.
func onlyResult(t *testing.T, c *resourceapi.ResourceClaim) resourceapi.DeviceRequestAllocationResult {
	t.Helper()
	if rs := c.Status.Allocation.Devices.Results; len(rs) == 1 {
		return rs[0]
	}
	t.Fatalf("claim %s: results %+v, want one device", c.Name, c.Status.Allocation.Devices.Results)
	return resourceapi.DeviceRequestAllocationResult{}
}

func consumedMiB(r resourceapi.DeviceRequestAllocationResult) int64 {
	q, ok := r.ConsumedCapacity["memory"]
	if !ok {
		return -1
	}
	return q.Value() >> 20
}

// TestTimeSlicedClaimsShareOneGPU: with --consumable-memory the driver
// publishes each H200 as shareable, with its memory as consumable capacity
// whose default is the whole GPU. Rota's scheduler then gives three
// time-sliced claims (40,960 + 61,440 + 30,720 MiB) one GPU and a claim that
// asks for no memory a GPU of its own; nothing more fits beside the latter.
// The driver prepares the three shares with their share IDs, sets the time
// slice once, refuses an exclusive claim that the allocator placed beside
// them (it asked for a little memory), also after a restart from the
// checkpoint, and resets the GPU only when the last share is unprepared.
func TestTimeSlicedClaimsShareOneGPU(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeviceClass(), framework.Namespace(sharingNS))
	slicer := &timeslice.Recorder{}
	n := startGPUNode(t, cp, sharingNode, "h200:2", func(n *gpuNode) {
		n.slicer = slicer
		n.opts.ConsumableMemory = true
	})

	whole := resource.MustParse(fmt.Sprintf("%dMi", h200MiB))
	wantCapacity := resourceapi.DeviceCapacity{Value: whole, RequestPolicy: &resourceapi.CapacityRequestPolicy{
		Default:    ptr.To(whole),
		ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Mi"))},
	}}
	var slice *resourceapi.ResourceSlice
	framework.WaitFor(t, "the node's ResourceSlice", func(ctx context.Context) (bool, string, error) {
		var err error
		slice, err = n.slice(ctx)
		return err == nil, fmt.Sprint(err), nil
	})
	for _, d := range slice.Spec.Devices {
		if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
			t.Errorf("%s: allowMultipleAllocations %v, want true", d.Name, d.AllowMultipleAllocations)
		}
		if diff := cmp.Diff(wantCapacity, d.Capacity["memory"]); diff != "" {
			t.Errorf("%s: memory capacity as stored by the API server (-want +got):\n%s", d.Name, diff)
		}
	}
	cp.StartScheduler(t)

	uuid0, uuid1 := gpu.MockUUID(sharingNode, 0), gpu.MockUUID(sharingNode, 1)
	onGPU0, onGPU1 := framework.UUIDSelector(uuid0), framework.UUIDSelector(uuid1)
	members := []struct {
		name string
		mib  int64
	}{{"a", 40960}, {"b", 61440}, {"c", 30720}}
	claims := map[string]*resourceapi.ResourceClaim{}
	shares := map[string]string{}
	for _, m := range members {
		c := scheduleShare(t, cp, shareClaim(m.name, m.mib, "Medium", onGPU0))
		r := onlyResult(t, c)
		if r.Device != "gpu-0" || r.ShareID == nil || consumedMiB(r) != m.mib {
			t.Errorf("member %s allocated %s share %v consuming %d MiB, want a share of gpu-0 consuming %d MiB",
				m.name, r.Device, r.ShareID, consumedMiB(r), m.mib)
		}
		if r.ShareID != nil {
			if other, dup := shares[string(*r.ShareID)]; dup {
				t.Errorf("members %s and %s got the same share ID %s", other, m.name, *r.ShareID)
			}
			shares[string(*r.ShareID)] = m.name
		}
		claims[m.name] = c
	}
	// No memory asked: the request policy's default, the whole GPU. gpu-0
	// has 10,651 MiB left, so it gets gpu-1, and nothing fits beside it.
	alone := scheduleShare(t, cp, shareClaim("alone", 0, ""))
	if r := onlyResult(t, alone); r.Device != "gpu-1" || consumedMiB(r) != h200MiB {
		t.Errorf("claim without memory allocated %s consuming %d MiB, want all of gpu-1", r.Device, consumedMiB(r))
	}
	late := shareClaim("late", 1024, "Medium", onGPU1)
	cp.Create(t, late, sharePod(late))
	msg := cp.WaitForPodUnschedulable(t, sharingNS, late.Name)
	t.Logf("a share of the GPU held whole is refused: %s", msg)
	// An exclusive claim (no GpuConfig) that asks for some memory: the
	// allocator places it beside the members; the driver must refuse it.
	intruder := scheduleShare(t, cp, shareClaim("intruder", 1024, "", onGPU0))
	if r := onlyResult(t, intruder); r.Device != "gpu-0" {
		t.Fatalf("exclusive claim with a memory request allocated %s, want gpu-0 beside the members", r.Device)
	}

	// The kubelet prepares.
	for _, m := range members {
		resp, err := n.prepare(ctx, claims[m.name])
		if err != nil {
			t.Fatalf("prepare member %s: %v", m.name, err)
		}
		r := onlyResult(t, claims[m.name])
		if len(resp.Devices) != 1 || resp.Devices[0].DeviceName != "gpu-0" || resp.Devices[0].GetShareId() != string(*r.ShareID) {
			t.Errorf("prepare member %s = %v, want gpu-0 with share ID %s", m.name, resp.Devices, *r.ShareID)
		}
	}
	if _, err := n.prepare(ctx, alone); err != nil {
		t.Fatalf("prepare the claim that has gpu-1 alone: %v", err)
	}
	wantCalls := []timeslice.Call{{UUID: uuid0, TimeSlice: gpuv1.MediumTimeSlice}}
	if diff := cmp.Diff(wantCalls, slicer.Calls()); diff != "" {
		t.Errorf("time-slice settings after prepares (-want +got):\n%s", diff)
	}
	for _, phase := range []string{"before", "after"} {
		if phase == "after" {
			n.restart()
		}
		if _, err := n.prepare(ctx, intruder); err == nil || !strings.Contains(err.Error(), "an exclusive claim needs it alone") {
			t.Errorf("%s a restart: prepare of an exclusive claim on the shared gpu-0 = %v, want a refusal", phase, err)
		}
	}
	got := n.checkpointClaims()
	for _, m := range members {
		c := got[string(claims[m.name].UID)]
		if len(c.Devices) != 1 || c.Devices[0].UUID != uuid0 || c.Devices[0].ShareID == "" || *c.Devices[0].MemoryMiB != m.mib {
			t.Errorf("checkpoint of member %s: %+v", m.name, c)
		}
	}
	// Preparing again after the restart gives the same answer.
	resp, err := n.prepare(ctx, claims["a"])
	if err != nil || len(resp.Devices) != 1 || resp.Devices[0].GetShareId() != string(*onlyResult(t, claims["a"]).ShareID) {
		t.Errorf("prepare member a again after the restart = %v, %v", resp, err)
	}

	// Members leave; the GPU is reset when the last one does.
	for i, m := range members {
		if err := n.unprepare(ctx, claims[m.name]); err != nil {
			t.Fatalf("unprepare member %s: %v", m.name, err)
		}
		if last := i == len(members)-1; !last && len(slicer.Calls()) != 1 {
			t.Errorf("GPU settings changed while members still run: %v", slicer.Calls())
		}
	}
	wantCalls = append(wantCalls, timeslice.Call{UUID: uuid0, TimeSlice: gpuv1.DefaultTimeSlice})
	if diff := cmp.Diff(wantCalls, slicer.Calls()); diff != "" {
		t.Errorf("time-slice settings after the last member left (-want +got):\n%s", diff)
	}
	if _, err := n.prepare(ctx, intruder); err != nil {
		t.Errorf("exclusive claim on gpu-0 once no member shares it: %v", err)
	}
}
