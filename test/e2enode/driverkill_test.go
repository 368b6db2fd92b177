package e2enode

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
)

// mockTimeSliceDelay is how long the driver's simulated time-slice change
// takes: the window in which a prepare is in flight.
const mockTimeSliceDelay = 3 * time.Second

// The driver pod is SIGKILLed while it prepares a claim (its checkpoint
// says PrepareStarted): the kubelet restarts it and retries, the restarted
// driver rolls the half-done prepare back and prepares again, and the pod
// starts exactly once, with the GPU no other claim holds.
func TestDriverKilledDuringPrepare(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(ctx, t, "driver-kill")
	const gpuIndex = 6
	tmpl := shareOfGPU(t, ns, "h100-6-share", gpuIndex, 20480)
	if _, err := cluster.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	driver := driverPod(ctx, t)
	restartsBefore := driver.Status.ContainerStatuses[0].RestartCount
	pod := gpuPod(ns, "victim", tmpl.Name)
	if _, err := cluster.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, c := range checkpointClaims(t) {
			if c.Namespace == ns && c.State == checkpoint.PrepareStarted {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the claim was never seen in flight (PrepareStarted): %v\n%s", err, cluster.podSummary(ctx, ns))
	}
	killed := killDriverProcess(t)
	t.Logf("SIGKILLed the driver (pid %d) with the claim's prepare in flight", killed)

	running, report := waitForReport(ctx, t, ns, pod.Name)
	if cs := running.Status.ContainerStatuses[0]; cs.RestartCount != 0 {
		t.Errorf("the pod's container restarted %d times, want it started once", cs.RestartCount)
	}
	if _, err := os.Stat(filepath.Join(cluster.node.PodLogDir(ns, running.Name, string(running.UID)), "main", "1.log")); err == nil {
		t.Errorf("the pod's container ran a second time (1.log)")
	}
	var held []checkpoint.Claim
	var uuid string
	for _, d := range nodeDevices(ctx, t, gpus) {
		if idx := d.Attributes[gpuv1.AttributeIndex].IntValue; idx != nil && *idx == gpuIndex {
			uuid = *d.Attributes[gpuv1.AttributeUUID].StringValue
		}
	}
	for _, c := range checkpointClaims(t) {
		for _, d := range c.Devices {
			if d.UUID == uuid {
				held = append(held, c)
			}
		}
	}
	if len(held) != 1 || held[0].Namespace != ns || held[0].State != checkpoint.PrepareCompleted {
		t.Errorf("claims holding GPU %d in the checkpoint: %+v, want the pod's, completed", gpuIndex, held)
	}
	if got := reportValue(report, "env NVIDIA_VISIBLE_DEVICES="); got != uuid {
		t.Errorf("the container sees %q, want GPU %d (%s)", got, gpuIndex, uuid)
	}
	after := driverPod(ctx, t)
	if after.Status.ContainerStatuses[0].RestartCount <= restartsBefore {
		t.Errorf("the driver container's restarts stayed at %d: the kill did not land", restartsBefore)
	}
	if err := cluster.waitForRota(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// killDriverProcess SIGKILLs the driver's process, seen from the host.
func killDriverProcess(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if arg0, _, _ := bytes.Cut(cmdline, []byte{0}); string(arg0) == "/dra-kubelet-plugin" {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatal("no dra-kubelet-plugin process on this host")
	return 0
}
