package admission

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// nvidiaGPU is the device plugin's extended resource, which workloads keep
// asking for while the cluster moves to DRA (docs/migration.md).
const nvidiaGPU v1.ResourceName = "nvidia.com/gpu"

// TestMigrationSwitchAndSwitchBack (#40): an unchanged pod spec asking for
// nvidia.com/gpu, on the default scheduler name, through a move from the
// device plugin to Rota's driver and back, on the real API server, the
// shipped admission policies and rota-scheduler:
//
//  1. both nodes on the device plugin: the pod is placed by the node's
//     allocatable nvidia.com/gpu, no claim;
//  2. node-b moved to DRA (its allocatable gone, its GPU published) with
//     the extended-resource mapping (a DeviceClass whose
//     extendedResourceName is nvidia.com/gpu, declared in rota-admission):
//     the same spec lands on node-b with a claim the scheduler writes;
//  3. node-b moved back (drained, its slice gone, allocatable back, the
//     mapping removed): the same spec lands on node-b by its allocatable
//     again, no claim.
func TestMigrationSwitchAndSwitchBack(t *testing.T) {
	cp := framework.StartControlPlaneWithRBAC(t)
	dpNode := func(name string) *v1.Node {
		n := framework.Node(name)
		n.Status.Capacity[nvidiaGPU] = resource.MustParse("1")
		n.Status.Allocatable[nvidiaGPU] = resource.MustParse("1")
		return n
	}
	cp.Create(t, framework.Namespace("team-a"), framework.DeviceClass(), dpNode("node-a"), dpNode("node-b"))
	cp.InstallAdmissionPolicies(t)
	cp.StartClaimController(t)
	cp.StartGarbageCollector(t)
	cp.StartScheduler(t)
	alice := cp.TenantAdmin(t, "team-a", "alice")
	ctx := context.Background()

	// The cluster admin routes nvidia.com/gpu pods to Rota from the start:
	// rota-scheduler places device-plugin pods like the default scheduler.
	params, err := cp.Client.CoreV1().ConfigMaps("rota-system").Get(ctx, "rota-admission", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	params.Data["extendedResourceNames"] = string(nvidiaGPU)
	if _, err := cp.Client.CoreV1().ConfigMaps("rota-system").Update(ctx, params, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	unchanged := func(name string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{nvidiaGPU: resource.MustParse("1")}}}}},
		}
	}
	framework.WaitFor(t, "nvidia.com/gpu pods to be routed to rota-scheduler", func(ctx context.Context) (bool, string, error) {
		p, err := alice.Client.CoreV1().Pods("team-a").Create(ctx, unchanged("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error(), nil
		}
		return p.Spec.SchedulerName == sched, p.Spec.SchedulerName, nil
	})
	run := func(name string) *v1.Pod {
		t.Helper()
		if _, err := alice.Client.CoreV1().Pods("team-a").Create(ctx, unchanged(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return cp.WaitForPodBound(t, "team-a", name)
	}
	expect := func(p *v1.Pod, node string, viaDRA bool) {
		t.Helper()
		if p.Spec.NodeName != node {
			t.Errorf("pod %s on %q, want %s", p.Name, p.Spec.NodeName, node)
		}
		if got := p.Status.ExtendedResourceClaimStatus != nil; got != viaDRA {
			t.Errorf("pod %s: extended-resource claim %v, want %v (%+v)", p.Name, got, viaDRA, p.Status.ExtendedResourceClaimStatus)
		}
	}

	// 1. Device plugin everywhere.
	first := run("first")
	other := map[string]string{"node-a": "node-b", "node-b": "node-a"}[first.Spec.NodeName]
	expect(first, first.Spec.NodeName, false)

	// 2. Move the other node to DRA: the device plugin leaves it (its
	// allocatable goes), Rota's driver publishes its GPU, and the cluster
	// admin maps nvidia.com/gpu to Rota's GPUs.
	setAllocatable(t, cp, other, false)
	cp.Create(t, framework.GPUSlice(other, framework.H100))
	if _, err := cp.Client.ResourceV1().DeviceClasses().Create(ctx, compatClass(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the nvidia.com/gpu class: %v", err)
	}
	second := run("second")
	expect(second, other, true)
	claim, err := cp.Client.ResourceV1().ResourceClaims("team-a").Get(ctx, second.Status.ExtendedResourceClaimStatus.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Driver != gpuv1.DriverName || a.Devices.Results[0].Pool != other {
		t.Errorf("claim %s allocation %+v, want one %s device of %s", claim.Name, claim.Status.Allocation, gpuv1.DriverName, other)
	}

	// 3. Roll the node back: drain it (the claim goes with its pod), the
	// driver's slice goes, the device plugin's allocatable returns, and the
	// mapping is removed.
	if err := cp.Client.CoreV1().Pods("team-a").Delete(ctx, "second", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the drained pod's claim to be deleted", func(ctx context.Context) (bool, string, error) {
		l, err := cp.Client.ResourceV1().ResourceClaims("team-a").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(l.Items) == 0, fmt.Sprintf("%d claims", len(l.Items)), nil
	})
	if err := cp.Client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=" + other}); err != nil {
		t.Fatal(err)
	}
	c, err := cp.Client.ResourceV1().DeviceClasses().Get(ctx, compatClass().Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.ExtendedResourceName = nil
	if _, err := cp.Client.ResourceV1().DeviceClasses().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing the mapping: %v", err)
	}
	setAllocatable(t, cp, other, true)
	third := run("third")
	expect(third, other, false)
}

// compatClass serves Rota's GPUs to pods asking for nvidia.com/gpu.
func compatClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nvidia-gpu.rota.dev"},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q", gpuv1.DriverName),
			}}},
			ExtendedResourceName: ptr.To(string(nvidiaGPU)),
		},
	}
}

// setAllocatable gives node the device plugin's one nvidia.com/gpu, or
// takes it away, as the kubelet does when the plugin comes and goes.
func setAllocatable(t *testing.T, cp *framework.ControlPlane, node string, present bool) {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if present {
		n.Status.Capacity[nvidiaGPU] = resource.MustParse("1")
		n.Status.Allocatable[nvidiaGPU] = resource.MustParse("1")
	} else {
		delete(n.Status.Capacity, nvidiaGPU)
		delete(n.Status.Allocatable, nvidiaGPU)
	}
	if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
