package e2enode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// shareOfGPU is a time-sliced share of the H100 of index gpuIndex with a
// VRAM budget of mib (the install publishes memory as consumable
// capacity, driver.consumableMemory.allNodes).
func shareOfGPU(t *testing.T, ns, name string, gpuIndex, mib int) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "timesliced." + gpuv1.DriverName,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(
					`device.attributes["%s"].model == "H100" && device.attributes["%s"].index == %d`, gpuv1.DriverName, gpuv1.DriverName, gpuIndex)}}},
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					gpuv1.CapacityMemory: resource.MustParse(fmt.Sprintf("%dMi", mib)),
				}},
			}}},
			Config: []resourceapi.DeviceClaimConfiguration{{
				Requests: []string{"gpu"},
				DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
					Driver: gpuv1.DriverName,
					Parameters: gpuConfig(t, map[string]any{
						"memoryMiB": mib,
						"sharing":   map[string]any{"strategy": "TimeSlicing", "timeSlicing": map[string]any{"timeSlice": "Medium"}},
					}),
				}},
			}},
		}}},
	}
}

// Two time-sliced pods share one GPU: both containers see the same UUID,
// each its own budget, and the budgets add up within the GPU's memory; a
// third share that would not fit waits, and says why.
func TestTimeSlicedPodsShareOneGPU(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(ctx, t, "sharing")
	const gpuIndex, shareMiB = 7, 40960
	tmpl := shareOfGPU(t, ns, "h100-7-share", gpuIndex, shareMiB)
	if _, err := cluster.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, name := range []string{"share-a", "share-b"} {
		_, report := runningPod(ctx, t, gpuPod(ns, name, tmpl.Name))
		uuid := reportValue(report, "env NVIDIA_VISIBLE_DEVICES=")
		if got := reportValue(report, "env "+gpuv1.EnvMemoryBudgetMiB+"="); got != fmt.Sprint(shareMiB) {
			t.Errorf("%s: budget %q, want %d", name, got, shareMiB)
		}
		uuids = append(uuids, uuid)
	}
	var gpuMiB int64
	for _, d := range nodeDevices(ctx, t, gpus) {
		if idx := d.Attributes[gpuv1.AttributeIndex].IntValue; idx != nil && *idx == gpuIndex {
			if *d.Attributes[gpuv1.AttributeUUID].StringValue != uuids[0] {
				t.Errorf("share-a runs on %s, want the GPU of index %d", uuids[0], gpuIndex)
			}
			memory := d.Capacity[gpuv1.CapacityMemory].Value
			gpuMiB = memory.Value() >> 20
		}
	}
	if uuids[0] == "" || uuids[0] != uuids[1] {
		t.Fatalf("the two shares see GPUs %q and %q, want one", uuids[0], uuids[1])
	}
	if 2*shareMiB > gpuMiB {
		t.Fatalf("budgets %d+%d MiB exceed the GPU's %d MiB", shareMiB, shareMiB, gpuMiB)
	}

	// A third share would overcommit the GPU's memory: it waits.
	third, err := cluster.client.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, "share-c", tmpl.Name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var why string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cluster.client.CoreV1().Pods(ns).Get(ctx, third.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("the third share was placed on %s: the GPU's memory is overcommitted", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == gpuv1.WaitingCondition && c.Status == corev1.ConditionTrue {
				why = c.Reason + ": " + c.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the third share: %v\n%s", err, cluster.podSummary(ctx, ns))
	}
	t.Logf("the third share waits: %s", why)
}

// reportValue returns the rest of the report line that starts with prefix.
func reportValue(report, prefix string) string {
	for _, line := range strings.Split(report, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	return ""
}
