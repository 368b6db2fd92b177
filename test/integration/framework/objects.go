package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// GPU describes one simulated GPU in a ResourceSlice.
type GPU struct {
	Model        string // short family: H100, A100, L4 ...
	Architecture string
	MemoryGiB    int64
	UUID         string
	Taints       []resourceapi.DeviceTaint
}

// Node returns a schedulable node with room for many pods.
func Node(name string) *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourcePods:   resource.MustParse("110"),
		v1.ResourceCPU:    resource.MustParse("64"),
		v1.ResourceMemory: resource.MustParse("512Gi"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}

// GPUSlice returns the node-local ResourceSlice publishing gpus as gpu-0, gpu-1, ...
// in one pool named after the node, the way Rota's driver publishes them.
func GPUSlice(node string, gpus ...GPU) *resourceapi.ResourceSlice {
	devices := make([]resourceapi.Device, 0, len(gpus))
	for i, g := range gpus {
		uuid := g.UUID
		if uuid == "" {
			uuid = fmt.Sprintf("GPU-%s-%d", node, i)
		}
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"uuid":         {StringValue: ptr.To(uuid)},
				"model":        {StringValue: ptr.To(g.Model)},
				"architecture": {StringValue: ptr.To(g.Architecture)},
				"index":        {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(g.MemoryGiB<<30, resource.BinarySI)},
			},
			Taints: g.Taints,
		})
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + gpuv1.DriverName},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   gpuv1.DriverName,
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices:  devices,
		},
	}
}

// H100 and friends are shorthands for common simulated GPUs.
var (
	H100 = GPU{Model: "H100", Architecture: "Hopper", MemoryGiB: 80}
	A100 = GPU{Model: "A100", Architecture: "Ampere", MemoryGiB: 80}
	L4   = GPU{Model: "L4", Architecture: "Ada", MemoryGiB: 24}
)

// GPUs returns n copies of g.
func GPUs(g GPU, n int) []GPU {
	out := make([]GPU, n)
	for i := range out {
		out[i] = g
	}
	return out
}

// DeviceClass returns the class selecting every device of Rota's driver.
func DeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: gpuv1.DeviceClassName},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", gpuv1.DriverName)},
			}},
		},
	}
}

// Tier is one entry of a firstAvailable list: a name and a CEL expression.
type Tier struct {
	Name string
	CEL  string
}

// ModelTier selects GPUs of one model.
func ModelTier(model string) Tier {
	return Tier{Name: strings.ToLower(model), CEL: fmt.Sprintf("device.attributes[%q].model == %q", gpuv1.DriverName, model)}
}

// TieredClaimTemplate returns a template whose one request "gpu" asks for one
// device of the first tier that can be satisfied.
func TieredClaimTemplate(namespace, name string, tiers ...Tier) *resourceapi.ResourceClaimTemplate {
	subs := make([]resourceapi.DeviceSubRequest, 0, len(tiers))
	for _, t := range tiers {
		subs = append(subs, resourceapi.DeviceSubRequest{
			Name:            t.Name,
			DeviceClassName: gpuv1.DeviceClassName,
			Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: t.CEL}}},
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           1,
		})
	}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			Spec: resourceapi.ResourceClaimSpec{
				Devices: resourceapi.DeviceClaim{
					Requests: []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: subs}},
				},
			},
		},
	}
}

// GPUPod returns a pod for schedulerName whose claim "gpu" comes from template.
func GPUPod(namespace, name, schedulerName, template string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1.PodSpec{
			SchedulerName: schedulerName,
			ResourceClaims: []v1.PodResourceClaim{{
				Name: "gpu", ResourceClaimTemplateName: ptr.To(template),
			}},
			Containers: []v1.Container{{
				Name:      "main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
}

// Namespace returns a namespace object.
func Namespace(name string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// DeploySchedulesNamespace is a namespace the cluster admin enabled for
// DeploySchedules.
func DeploySchedulesNamespace(name string) *v1.Namespace {
	ns := Namespace(name)
	ns.Labels = map[string]string{gpuv1.DeploySchedulesNamespaceLabel: gpuv1.DeploySchedulesEnabled}
	return ns
}

// Create creates each object with the typed client for its kind and fails the
// test on the first error.
func (cp *ControlPlane) Create(tb testing.TB, objs ...any) {
	tb.Helper()
	ctx := context.Background()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.Namespace:
			_, err = cp.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *v1.Node:
			_, err = cp.Client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *v1.Pod:
			_, err = cp.Client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.DeviceClass:
			_, err = cp.Client.ResourceV1().DeviceClasses().Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceSlice:
			_, err = cp.Client.ResourceV1().ResourceSlices().Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceClaim:
			_, err = cp.Client.ResourceV1().ResourceClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceClaimTemplate:
			_, err = cp.Client.ResourceV1().ResourceClaimTemplates(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			tb.Fatalf("Create: unsupported object %T", obj)
		}
		if err != nil {
			tb.Fatalf("create %T: %v", obj, err)
		}
	}
}
