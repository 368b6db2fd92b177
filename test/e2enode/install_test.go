package e2enode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

const (
	release   = "rota"
	namespace = "rota-system"
)

// installValues are the chart values of this node: Rota's images as
// imported (never pulled), one replica of each controller (one node, two
// cores), the kubelet's and the runtime's directories under the node's
// directory, and the driver on NVML's mock (the one simulated part).
func (c *e2eCluster) installValues() map[string]any {
	image := func(key string) map[string]any {
		ref := c.images[key]
		return map[string]any{"repository": ref.Context().Name(), "tag": ref.TagStr(), "pullPolicy": "Never"}
	}
	return map[string]any{
		"driver": map[string]any{
			"image":      image("driver"),
			"kubeletDir": c.node.KubeletDir(),
			"cdiDir":     c.node.CDIDir(),
			"driverRoot": c.node.DriverRoot(),
			// No privilege: the mock's time slices need none, and the
			// hardened profile (no capabilities, RuntimeDefault seccomp,
			// read-only root) runs on the real runc.
			"privileged": false,
			// Memory as consumable capacity, so time-sliced claims share a GPU.
			"consumableMemory": map[string]any{"allNodes": true},
			"extraArgs": []string{
				"--mock-profile=dgx-h100",
				// A time-slice change takes as long as nvidia-smi's can: a
				// prepare slow enough to kill the driver in (driverkill_test.go).
				"--mock-time-slice-delay=" + mockTimeSliceDelay.String(),
				// /metrics on the pod's address: the tests scrape it from the host.
				fmt.Sprintf("--metrics-address=:%d", driverMetricsPort),
			},
		},
		"scheduler":          map[string]any{"image": image("scheduler"), "replicas": 1},
		"scheduleController": map[string]any{"image": image("scheduleController"), "replicas": 1},
	}
}

// helm runs the chart's CLI (make e2e-node's bin/tools/helm) against the
// cluster.
func (c *e2eCluster) helm(ctx context.Context, args ...string) error {
	args = append(args, "--kubeconfig", c.kubeconfig, "--namespace", namespace)
	out, err := exec.CommandContext(ctx, filepath.Join(c.binDir, "tools", "helm"), args...).CombinedOutput()
	klog.FromContext(ctx).V(2).Info("helm", "args", args, "output", string(out))
	if err != nil {
		return fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// installRota installs the chart as an admin does (helm install) and waits
// until the driver, rota-scheduler and schedule-controller run.
func (c *e2eCluster) installRota(ctx context.Context) error {
	values, err := yaml.Marshal(c.installValues())
	if err != nil {
		return err
	}
	file := filepath.Join(c.dir, "values.yaml")
	if err := os.WriteFile(file, values, 0o600); err != nil {
		return err
	}
	// The namespace first, as docs/install.md has an admin create it: with
	// its Pod Security labels, so the PodSecurity admission plugin checks
	// every pod of the release.
	raw, err := os.ReadFile(filepath.Join("..", "..", "manifests", "driver", "namespace.yaml"))
	if err != nil {
		return err
	}
	var ns corev1.Namespace
	if err := yaml.Unmarshal(raw, &ns); err != nil {
		return fmt.Errorf("manifests/driver/namespace.yaml: %w", err)
	}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns.Name, err)
	}
	if err := c.helm(ctx, "install", release, filepath.Join("..", "..", "charts", "rota"), "--values", file); err != nil {
		return err
	}
	return c.waitForRota(ctx, 4*time.Minute)
}

// waitForRota waits until every DaemonSet and Deployment of the release is
// ready.
func (c *e2eCluster) waitForRota(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		dss, err := c.client.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		deps, err := c.client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		var waiting []string
		for _, ds := range dss.Items {
			if ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberReady < ds.Status.DesiredNumberScheduled || ds.Status.UpdatedNumberScheduled < ds.Status.DesiredNumberScheduled {
				waiting = append(waiting, fmt.Sprintf("DaemonSet %s: %d/%d ready", ds.Name, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled))
			}
		}
		for _, d := range deps.Items {
			if !deploymentReady(&d) {
				waiting = append(waiting, fmt.Sprintf("Deployment %s: %d/%d ready", d.Name, d.Status.ReadyReplicas, ptrOr(d.Spec.Replicas, 1)))
			}
		}
		last = strings.Join(waiting, "; ")
		return len(dss.Items) > 0 && len(deps.Items) > 0 && len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("rota not running after %s: %s: %w\n%s", timeout, last, err, c.podSummary(ctx, namespace))
	}
	return nil
}

func deploymentReady(d *appsv1.Deployment) bool {
	want := ptrOr(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas >= want && d.Status.UpdatedReplicas >= want
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// uninstallRota removes the release and waits for its pods to be gone
// from the node (no garbage collector runs here: the pods are deleted
// directly, and the kubelet stops them).
func (c *e2eCluster) uninstallRota(ctx context.Context) error {
	err := c.helm(ctx, "uninstall", release)
	if derr := c.deletePods(ctx, namespace, 2*time.Minute); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}
