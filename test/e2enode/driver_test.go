package e2enode

import (
	"context"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// The kubelet registers the chart's driver pod, and the driver publishes
// the node's eight GPUs, each named by its UUID.
func TestDriverRegistersAndPublishesGPUs(t *testing.T) {
	ctx := context.Background()
	devices := nodeDevices(ctx, t, gpus)
	for _, d := range devices {
		uuid := d.Attributes[gpuv1.AttributeUUID]
		if uuid.StringValue == nil || !strings.HasPrefix(*uuid.StringValue, "GPU-") {
			t.Errorf("device %s: uuid attribute %v, want GPU-…", d.Name, uuid)
		}
	}
	metrics, err := cluster.node.KubeletMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, gpuv1.DriverName) {
		t.Errorf("the kubelet's metrics never name %s: not registered", gpuv1.DriverName)
	}
}

// nodeDevices waits until the node's ResourceSlices of gpu.rota.dev hold
// want devices, and returns them.
func nodeDevices(ctx context.Context, t *testing.T, want int) []resourceapi.Device {
	t.Helper()
	var devices []resourceapi.Device
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		slices, err := cluster.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		devices = devices[:0]
		for _, s := range slices.Items {
			if s.Spec.Driver == gpuv1.DriverName && s.Spec.NodeName != nil && *s.Spec.NodeName == cluster.nodeName {
				devices = append(devices, s.Spec.Devices...)
			}
		}
		return len(devices) == want, nil
	})
	if err != nil {
		t.Fatalf("node %s publishes %d %s devices, want %d: %v", cluster.nodeName, len(devices), gpuv1.DriverName, want, err)
	}
	return devices
}
