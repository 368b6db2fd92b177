package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// H200MemoryMiB is what NVML reports for an H200 (141 GB HBM3e).
const H200MemoryMiB = 143771

// H200 is a simulated H200; GPUSlice publishes it with MemoryGiB, so use
// H200Slice for its exact memory.
var H200 = GPU{Model: "H200", Architecture: "Hopper", MemoryGiB: 140}

// H200Slice is the slice of an hgx-h200-shaped node: n H200s of 143,771 MiB
// each, whose memory is consumable capacity (allowMultipleAllocations with a
// request policy that defaults to the whole GPU), so time-sliced claims can
// share a GPU, each asking for its memoryMiB, while a claim that asks for no
// memory still gets the GPU to itself.
func H200Slice(node string, n int) *resourceapi.ResourceSlice {
	slice := GPUSlice(node, GPUs(H200, n)...)
	mem := resource.MustParse(fmt.Sprintf("%dMi", H200MemoryMiB))
	for i := range slice.Spec.Devices {
		d := &slice.Spec.Devices[i]
		d.AllowMultipleAllocations = ptr.To(true)
		d.Capacity["memory"] = resourceapi.DeviceCapacity{
			Value: mem,
			RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    ptr.To(mem),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Mi"))},
			},
		}
	}
	return slice
}

// SharedGPUTemplate returns a template whose one request "gpu" asks for one
// GPU time-sliced with memoryMiB of its memory (consumable capacity and the
// GpuConfig memoryMiB the scheduler budgets with). Extra CEL selectors and
// tolerations narrow and widen where it may land. memoryMiB 0 declares no
// memoryMiB and consumes the whole GPU.
func SharedGPUTemplate(namespace, name string, memoryMiB int64, tolerations []resourceapi.DeviceToleration, cel ...string) *resourceapi.ResourceClaimTemplate {
	req := &resourceapi.ExactDeviceRequest{
		DeviceClassName: gpuv1.DeviceClassName,
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           1,
		Tolerations:     tolerations,
	}
	for _, e := range cel {
		req.Selectors = append(req.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	cfg := map[string]any{
		"apiVersion": gpuv1.APIVersion,
		"kind":       gpuv1.Kind,
		"sharing":    map[string]any{"strategy": gpuv1.TimeSlicing},
	}
	if memoryMiB > 0 {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			"memory": resource.MustParse(fmt.Sprintf("%dMi", memoryMiB)),
		}}
		cfg["memoryMiB"] = memoryMiB
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // a map of strings and numbers always encodes
	}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			Spec: resourceapi.ResourceClaimSpec{
				Devices: resourceapi.DeviceClaim{
					Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}},
					Config: []resourceapi.DeviceClaimConfiguration{{
						DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
							Driver: gpuv1.DriverName, Parameters: runtime.RawExtension{Raw: raw},
						}},
					}},
				},
			},
		},
	}
}

// UUIDSelector is the CEL expression that pins a request to one GPU.
func UUIDSelector(uuid string) string {
	return fmt.Sprintf("device.attributes[%q].uuid == %q", gpuv1.DriverName, uuid)
}

// CreateDeployment creates a Deployment and the ReplicaSet it would own, as
// the deployment controller would (none runs here), and returns the
// ReplicaSet; ReplicaPod makes pods owned by it.
func (cp *ControlPlane) CreateDeployment(tb testing.TB, namespace, name string) *appsv1.ReplicaSet {
	tb.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	tmpl := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
	}
	dep, err := cp.Client.AppsV1().Deployments(namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("create Deployment %s/%s: %v", namespace, name, err)
	}
	rs, err := cp.Client.AppsV1().ReplicaSets(namespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name + "-rs", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true)}},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("create ReplicaSet of %s/%s: %v", namespace, name, err)
	}
	return rs
}

// ReplicaPod is a GPUPod owned by rs, as the ReplicaSet controller makes them.
func ReplicaPod(rs *appsv1.ReplicaSet, name, schedulerName, template string) *v1.Pod {
	pod := GPUPod(rs.Namespace, name, schedulerName, template)
	pod.Labels = rs.Spec.Selector.MatchLabels
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	return pod
}

// WithDeviceClass makes every request of tmpl ask for class instead.
func WithDeviceClass(tmpl *resourceapi.ResourceClaimTemplate, class string) *resourceapi.ResourceClaimTemplate {
	for i := range tmpl.Spec.Spec.Devices.Requests {
		if r := tmpl.Spec.Spec.Devices.Requests[i].Exactly; r != nil {
			r.DeviceClassName = class
		}
	}
	return tmpl
}
