package e2enode

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet restarts under a running GPU pod: the pod keeps running in
// the same container with its device, the driver prepares nothing again,
// and the kubelet registers the driver anew (a new GPU pod starts).
func TestKubeletRestartKeepsPreparedClaims(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(ctx, t, "kubelet-restart")
	tmpl := h100ElseA100(t, ns, 10240)
	if _, err := cluster.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, report := runningPod(ctx, t, gpuPod(ns, "before", tmpl.Name))
	uuid := reportValue(report, "env NVIDIA_VISIBLE_DEVICES=")
	claim, _ := allocatedDevices(ctx, t, before)
	prepares := driverPrepares(ctx, t)

	if err := cluster.node.RestartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cluster.waitForNodeReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// A pod placed after the restart runs: the kubelet reached the driver.
	runningPod(ctx, t, gpuPod(ns, "after", tmpl.Name))

	p, err := cluster.client.CoreV1().Pods(ns).Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID || cs[0].State.Running == nil {
		t.Errorf("the pod's container after the kubelet restart: %+v, want the same one still running", cs)
	}
	if _, held := checkpointClaims(t)[string(claim.UID)]; !held {
		t.Errorf("the checkpoint lost claim %s over the kubelet restart", claim.UID)
	}
	// One prepare: the new pod's claim. The first claim was not prepared again.
	if got := driverPrepares(ctx, t); got != prepares+1 {
		t.Errorf("the driver prepared %d claims over the restart, want 1 (the new pod's)", got-prepares)
	}
	if got, _ := cluster.node.ContainerLog(ns, before.Name, string(before.UID), "main"); reportValue(got, "env NVIDIA_VISIBLE_DEVICES=") != uuid {
		t.Errorf("the running pod's log changed over the restart")
	}
}
