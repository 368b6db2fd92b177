package install

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/preflight"
	"github.com/rota-dev/rota/pkg/sandbox/apply"
	"github.com/rota-dev/rota/test/integration/framework"
)

func statuses(rs []preflight.Result) map[string]preflight.Status {
	out := map[string]preflight.Status{}
	for _, r := range rs {
		out[r.Name] = r.Status
	}
	return out
}

func wantStatuses(t *testing.T, when string, rs []preflight.Result, want map[string]preflight.Status) {
	t.Helper()
	got := statuses(rs)
	for name, st := range want {
		if got[name] != st {
			var out bytes.Buffer
			_ = preflight.Print(&out, rs)
			t.Errorf("%s: %q is %s, want %s\n%s", when, name, got[name], st, out.String())
		}
	}
}

func result(rs []preflight.Result, name string) preflight.Result {
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	return preflight.Result{}
}

// TestPreflightBeforeAndAfterInstall runs `kubectl rota preflight`'s checks
// against a real API server without Rota (the cluster checks pass, Rota's
// own fail with what to do), then after installing the manifests, with GPU
// nodes, their ResourceSlices and a pod whose claim the driver prepared.
// No kubelet or controller-manager runs here, so the test writes the
// statuses they would write.
func TestPreflightBeforeAndAfterInstall(t *testing.T) {
	cp := framework.StartControlPlaneWith(t, framework.ControlPlaneOptions{WithoutCRDs: true})
	ctx := context.Background()
	opts := preflight.DefaultOptions()

	before := preflight.Run(ctx, cp.Client, opts)
	wantStatuses(t, "before the install", before, map[string]preflight.Status{
		// The in-process API server has no release stamp but emulates
		// 1.37; pkg/preflight's unit test judges other versions.
		"Kubernetes version":           preflight.OK,
		"DRA API":                      preflight.OK,
		"Admission policy API":         preflight.OK,
		"DRA enabled":                  preflight.OK,
		"Rota CRDs":                    preflight.Fail,
		"Rota DeviceClasses":           preflight.Fail,
		"Rota controllers":             preflight.Fail,
		"Driver DaemonSet":             preflight.Fail,
		"Driver registered":            preflight.Fail,
		"CDI in the container runtime": preflight.Unknown,
	})
	if !preflight.Failed(before) {
		t.Error("before the install: Failed() = false")
	}
	var out bytes.Buffer
	if err := preflight.Print(&out, before); err != nil {
		t.Fatal(err)
	}
	t.Logf("before the install:\n%s", out.String())
	for _, want := range []string{"FAIL    Rota CRDs: rota.dev/v1alpha1 is not served", "-> install Rota (docs/install.md)", "OK      DRA API: resource.k8s.io/v1 serves"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("before the install, the output lacks %q:\n%s", want, out.String())
		}
	}

	// Install for real.
	applier, err := apply.NewApplier(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	objs := render(t, "")
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", ""} {
		for _, o := range objs {
			if (kind == "" && o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition") || o.GetKind() == kind {
				if err := applier.Apply(ctx, o, false); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// What the Deployment and DaemonSet controllers and the kubelets
	// would report.
	for _, name := range []string{"rota-scheduler", "rota-schedule-controller"} {
		d, err := cp.Client.AppsV1().Deployments(opts.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
		if _, err := cp.Client.AppsV1().Deployments(opts.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setDaemonSet := func(desired, ready int32) {
		t.Helper()
		ds, err := cp.Client.AppsV1().DaemonSets(opts.Namespace).Get(ctx, "rota-dra-kubelet-plugin", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: desired, CurrentNumberScheduled: desired, NumberReady: ready, UpdatedNumberScheduled: desired, NumberAvailable: ready}
		if _, err := cp.Client.AppsV1().DaemonSets(opts.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setDaemonSet(2, 1)
	for _, n := range []string{"gpu-1", "gpu-2"} {
		node := framework.Node(n)
		node.Labels["nvidia.com/gpu.present"] = "true"
		cp.Create(t, node)
	}
	cp.Create(t, framework.Node("cpu-1"), framework.GPUSlice("gpu-1", framework.GPUs(framework.H100, 8)...))

	// The CRDs are served once established; discovery follows shortly.
	var mid []preflight.Result
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		mid = preflight.Run(ctx, cp.Client, opts)
		return statuses(mid)["Rota CRDs"] == preflight.OK, nil
	}); err != nil {
		t.Fatalf("the CRDs are not served after the install: %v", result(mid, "Rota CRDs"))
	}
	wantStatuses(t, "one GPU node without slices, one driver pod not ready", mid, map[string]preflight.Status{
		"Rota DeviceClasses": preflight.OK,
		"Rota controllers":   preflight.OK,
		"Driver DaemonSet":   preflight.Fail,
		"Driver registered":  preflight.Fail,
	})
	if r := result(mid, "Driver registered"); !strings.Contains(r.Detail, "gpu-2") || strings.Contains(r.Detail, "gpu-1") || strings.Contains(r.Detail, "cpu-1") {
		t.Errorf("Driver registered names %q, want only gpu-2", r.Detail)
	}

	setDaemonSet(2, 2)
	cp.Create(t, framework.GPUSlice("gpu-2", framework.GPUs(framework.A100, 4)...))

	// A pod with a claim the driver prepared; first its runtime refuses
	// the CDI devices, then it runs.
	cp.EnsureNamespace(t, "team-a")
	claim := framework.DeviceClaim("team-a", "train", 1)
	pod := framework.ClaimPod("team-a", "train", "rota-scheduler", "train")
	cp.Create(t, claim, pod)
	// Bound as rota-scheduler would bind it (the admission policies refuse
	// a GPU pod created with spec.nodeName).
	if err := cp.Client.CoreV1().Pods("team-a").Bind(ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Target: v1.ObjectReference{Kind: "Node", Name: "gpu-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err = cp.Client.CoreV1().Pods("team-a").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim, err = cp.Client.ResourceV1().ResourceClaims("team-a").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: gpuv1.DriverName, Pool: "gpu-1", Device: "gpu-0"}}}}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := cp.Client.ResourceV1().ResourceClaims("team-a").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPod := func(state v1.ContainerState) {
		t.Helper()
		p, err := cp.Client.CoreV1().Pods("team-a").Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image, State: state}}
		if _, err := cp.Client.CoreV1().Pods("team-a").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setPod(v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CreateContainerError",
		Message: "failed to inject CDI devices: unresolvable CDI devices " + gpuv1.CDIVendor + "/gpu=gpu-0"}})
	refused := preflight.Run(ctx, cp.Client, opts)
	wantStatuses(t, "the runtime refuses the CDI devices", refused, map[string]preflight.Status{"CDI in the container runtime": preflight.Fail})
	if r := result(refused, "CDI in the container runtime"); !strings.Contains(r.Detail, "team-a/train") || !strings.Contains(r.Detail, "unresolvable CDI devices") {
		t.Errorf("CDI check says %q, want the pod and the runtime's message", r.Detail)
	}

	setPod(v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}})
	after := preflight.Run(ctx, cp.Client, opts)
	for _, r := range after {
		if r.Status != preflight.OK {
			var out bytes.Buffer
			_ = preflight.Print(&out, after)
			t.Errorf("after the install: %s is %s\n%s", r.Name, r.Status, out.String())
			break
		}
	}
	out.Reset()
	_ = preflight.Print(&out, after)
	t.Logf("after the install:\n%s", out.String())
	if r := result(after, "CDI in the container runtime"); !strings.Contains(r.Detail, "pod team-a/train runs on node gpu-1") {
		t.Errorf("CDI check says %q, want the pod that ran and its node", r.Detail)
	}
	if preflight.Failed(after) {
		t.Error("after the install: Failed() = true")
	}
	if r := result(after, "Driver registered"); r.Detail != "2 GPU nodes publish 12 GPUs through "+gpuv1.DriverName {
		t.Errorf("Driver registered says %q", r.Detail)
	}
}
