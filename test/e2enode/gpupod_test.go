package e2enode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/scheduler"
)

// createNamespace creates a namespace for one test and deletes its pods at
// the end (the kubelet stops them; no namespace controller runs here).
func createNamespace(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	_, err := cluster.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.deletePods(context.Background(), name, 2*time.Minute); err != nil {
			t.Error(err)
		}
	})
	// Pods need the default ServiceAccount (the ServiceAccount admission
	// plugin is on) and kube-root-ca.crt, which the controllers add.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, saErr := cluster.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		_, cmErr := cluster.client.CoreV1().ConfigMaps(name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return saErr == nil && cmErr == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: no default ServiceAccount or kube-root-ca.crt: %v", name, err)
	}
	return name
}

// gpuConfig is the driver's opaque claim configuration.
func gpuConfig(t *testing.T, cfg map[string]any) runtime.RawExtension {
	t.Helper()
	cfg["apiVersion"] = gpuv1.APIVersion
	cfg["kind"] = gpuv1.Kind
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: raw}
}

// h100ElseA100 is the claim template of the README: an H100, else an A100,
// with a VRAM budget of budgetMiB.
func h100ElseA100(t *testing.T, ns string, budgetMiB int) *resourceapi.ResourceClaimTemplate {
	model := func(m string) []resourceapi.DeviceSelector {
		return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes["%s"].model == "%s"`, gpuv1.DriverName, m)}}}
	}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "h100-else-a100", Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "h100", DeviceClassName: gpuv1.DriverName, Selectors: model("H100")},
				{Name: "a100", DeviceClassName: gpuv1.DriverName, Selectors: model("A100")},
			}}},
			Config: []resourceapi.DeviceClaimConfiguration{{
				Requests: []string{"gpu"},
				DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
					Driver: gpuv1.DriverName, Parameters: gpuConfig(t, map[string]any{"memoryMiB": budgetMiB}),
				}},
			}},
		}}},
	}
}

// gpuPod is a pod of the workload image with one claim from template,
// placed by rota-scheduler.
func gpuPod(ns, name, template string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:                 scheduler.ProfileName,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			ResourceClaims:                []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}},
			Containers: []corev1.Container{{
				Name: "main", Image: workloadImage, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
}

// runningPod creates pod and waits until its container runs and has
// printed its report, which it returns.
func runningPod(ctx context.Context, t *testing.T, pod *corev1.Pod) (*corev1.Pod, string) {
	t.Helper()
	if _, err := cluster.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitForReport(ctx, t, pod.Namespace, pod.Name)
}

// waitForReport waits until the pod's container runs and has printed its
// report, and returns the pod and the report.
func waitForReport(ctx context.Context, t *testing.T, ns, name string) (*corev1.Pod, string) {
	t.Helper()
	var (
		pod    *corev1.Pod
		report string
	)
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cluster.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		pod = p
		report, err = cluster.node.ContainerLog(p.Namespace, p.Name, string(p.UID), "main")
		return err == nil && strings.Contains(report, "ready\n"), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s did not run and report: %v\n%s", ns, name, err, cluster.podSummary(ctx, ns))
	}
	return pod, report
}

// allocatedDevices returns the pool devices allocated to the pod's claim.
func allocatedDevices(ctx context.Context, t *testing.T, pod *corev1.Pod) (*resourceapi.ResourceClaim, []string) {
	t.Helper()
	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s: claim statuses %v", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	claim, err := cluster.client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s of running pod %s is not allocated", claim.Name, pod.Name)
	}
	var names []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		names = append(names, r.Device)
	}
	return claim, names
}

// deviceByName returns the published device of that name.
func deviceByName(ctx context.Context, t *testing.T, name string) resourceapi.Device {
	t.Helper()
	for _, d := range nodeDevices(ctx, t, gpus) {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no published device %s", name)
	return resourceapi.Device{}
}

// checkpointClaims returns the claim UIDs the driver's checkpoint holds.
func checkpointClaims(t *testing.T) map[string]checkpoint.Claim {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cluster.node.KubeletDir(), "plugins", gpuv1.DriverName, checkpoint.FileName))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return cp.Claims
}

// A pod asking for an H100, else an A100, is placed by rota-scheduler on
// an H100, the kubelet prepares its claim through the driver, containerd
// applies the CDI spec, and the container sees its GPU's UUID, its device
// node and its VRAM budget. Deleting the pod unprepares the claim: the
// spec and the checkpoint entry go, and the GPU is free again.
func TestGPUPodSeesItsDevice(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(ctx, t, "gpu-pod")
	tmpl := h100ElseA100(t, ns, 20480)
	if _, err := cluster.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, report := runningPod(ctx, t, gpuPod(ns, "train", tmpl.Name))
	t.Logf("container report:\n%s", report)
	claim, names := allocatedDevices(ctx, t, pod)
	if len(names) != 1 {
		t.Fatalf("claim %s: devices %v, want one", claim.Name, names)
	}
	if got := claim.Status.Allocation.Devices.Results[0].Request; got != "gpu/h100" {
		t.Errorf("allocated for subrequest %q, want gpu/h100 (the first tier)", got)
	}
	dev := deviceByName(ctx, t, names[0])
	uuid := *dev.Attributes[gpuv1.AttributeUUID].StringValue
	// The mock GPUs' minor numbers are their indexes, as on a DGX.
	minor := dev.Attributes[gpuv1.AttributeIndex]
	for _, want := range []string{
		"env NVIDIA_VISIBLE_DEVICES=" + uuid + "\n",
		"env " + gpuv1.EnvMemoryBudgetMiB + "=20480\n",
		"dev /dev/nvidiactl\n",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the container's report lacks %q", strings.TrimSpace(want))
		}
	}
	if minor.IntValue != nil && !strings.Contains(report, fmt.Sprintf("dev /dev/nvidia%d\n", *minor.IntValue)) {
		t.Errorf("the container lacks /dev/nvidia%d, its GPU's device node", *minor.IntValue)
	}
	if _, ok := checkpointClaims(t)[string(claim.UID)]; !ok {
		t.Errorf("the checkpoint does not hold prepared claim %s", claim.UID)
	}
	spec := filepath.Join(cluster.node.CDIDir(), "k8s.gpu.rota.dev-claim_"+string(claim.UID)+".json")
	if _, err := os.Stat(spec); err != nil {
		t.Errorf("CDI spec of the claim: %v", err)
	}

	// Gone: unprepared, spec and checkpoint entry removed, claim deleted.
	if err := cluster.client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cluster.client.ResourceV1().ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		_, held := checkpointClaims(t)[string(claim.UID)]
		_, specErr := os.Stat(spec)
		return apierrors.IsNotFound(err) && !held && os.IsNotExist(specErr), nil
	})
	if err != nil {
		t.Fatalf("after the pod was deleted, claim %s was not unprepared and removed: %v", claim.Name, err)
	}
}
