package app

import (
	"context"
	"errors"
	"fmt"
	"io"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/health"
	"github.com/rota-dev/rota/pkg/driver/resources"
)

// Discover is the read-only mode: it initialises NVML (or the mock), probes
// each GPU once and writes the ResourceSlice the plugin would publish as YAML.
// It writes no file, talks to no API server and changes no GPU setting.
func Discover(ctx context.Context, o Options, out io.Writer) error {
	if o.NodeName == "" {
		return errors.New("--node-name (or NODE_NAME) is required")
	}
	lib, _, inv, closeNVML, err := openNVML(ctx, &o, clock.RealClock{})
	if err != nil {
		return err
	}
	defer closeNVML()
	mon := health.NewMonitor(lib, &inv, clock.RealClock{}, health.Options{})
	mon.Refresh(ctx)
	res, err := resources.ForNode(o.NodeName, &inv, mon.Statuses(), resources.Options{ConsumableMemory: o.ConsumableMemory})
	if err != nil {
		return err
	}
	slice := resourceapi.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: o.NodeName + "-" + gpuv1.DriverName + "-"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   gpuv1.DriverName,
			NodeName: ptr.To(o.NodeName),
			Pool:     resourceapi.ResourcePool{Name: o.NodeName, Generation: 1, ResourceSliceCount: 1},
			Devices:  res.Pools[o.NodeName].Slices[0].Devices,
		},
	}
	data, err := yaml.Marshal(slice)
	if err != nil {
		return fmt.Errorf("encoding ResourceSlice: %w", err)
	}
	source := "NVML"
	if o.MockProfile != "" {
		source = "mock profile " + o.MockProfile
	}
	header := fmt.Sprintf("# %d GPU(s) from %s; driver %s (published as %s), CUDA %s\n",
		len(inv.GPUs), source, inv.DriverVersionRaw, inv.DriverVersion, inv.CUDADriverVersion)
	for _, g := range inv.Skipped {
		header += fmt.Sprintf("# not published: GPU %d (%s, %s): %s\n", g.Index, g.UUID, g.ProductName, g.Reason)
	}
	_, err = io.WriteString(out, header+string(data))
	return err
}
