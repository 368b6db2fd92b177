package forecast

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/preview"
	"github.com/rota-dev/rota/pkg/schedule/validation"
)

var hcm = time.FixedZone("+07", 7*3600)

// at is day d of October 2026 at hh:mm in Asia/Ho_Chi_Minh.
func at(d, hh, mm int) time.Time { return time.Date(2026, 10, d, hh, mm, 0, 0, hcm) }

// nodeSlice publishes n GPUs of model on node, as the driver does.
func nodeSlice(node, model string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{}
	s.Name = node + "-gpu"
	s.Spec = resourceapi.ResourceSliceSpec{Driver: gpuv1.DriverName, NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				gpuv1.AttributeModel: {StringValue: ptr.To(model)},
				gpuv1.AttributeUUID:  {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, i))},
				gpuv1.AttributeIndex: {IntValue: ptr.To(int64(i))},
			},
		})
	}
	return s
}

func gpuClass() *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{}
	c.Name = gpuv1.DeviceClassName
	c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.rota.dev"`}}}
	return c
}

// gpus is one pod asking for n GPUs of the driver on one node.
func gpus(n int64) []preview.Demand {
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: gpuv1.DeviceClassName, Count: n},
	}}}}
	return []preview.Demand{{PodClaims: []resourceapi.ResourceClaimSpec{spec}, Pods: 1}}
}

// weekSchedule compiles examples/deployschedule-week.yaml, with edit
// applied first.
func weekSchedule(t testing.TB, edit func(*v1alpha1.DeploySchedule)) (*v1alpha1.DeploySchedule, *schedule.Schedule) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "deployschedule-week.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ds, errs := validation.DecodeDeploySchedule(data)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if edit != nil {
		edit(ds)
	}
	if errs := validation.ValidateDeploySchedule(ds); len(errs) > 0 {
		t.Fatal(errs)
	}
	c, err := schedule.Compile(ds)
	if err != nil {
		t.Fatal(err)
	}
	return ds, c
}

func runForecast(t testing.TB, in Input) *Forecast {
	t.Helper()
	f, err := Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
