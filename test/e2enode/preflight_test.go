package e2enode

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// preflight runs kubectl rota preflight against the cluster, as an admin
// does after installing, and returns its output and whether it passed.
func preflight(ctx context.Context, t *testing.T) (string, bool) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(cluster.binDir, "kubectl-rota"), "preflight", "--kubeconfig", cluster.kubeconfig)
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("kubectl rota preflight: %v\n%s", err, out)
	}
	return string(out), err == nil
}

// kubectl rota preflight says every check is OK on the installed node,
// with the CDI evidence of a started GPU pod; with the driver DaemonSet
// scaled away from the node it fails, and passes again once it is back.
func TestPreflightOnTheNode(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(ctx, t, "preflight")
	tmpl := h100ElseA100(t, ns, 10240)
	if _, err := cluster.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runningPod(ctx, t, gpuPod(ns, "evidence", tmpl.Name))

	out, ok := preflight(ctx, t)
	t.Logf("preflight on the installed node:\n%s", out)
	if !ok || strings.Contains(out, "FAIL") || strings.Contains(out, "UNKNOWN") {
		t.Errorf("preflight is not all OK on the installed node")
	}

	// The DaemonSet "scaled away": a nodeSelector no node matches.
	const ds = "rota-dra-kubelet-plugin"
	patch := func(selector string) {
		t.Helper()
		p := `{"spec":{"template":{"spec":{"nodeSelector":` + selector + `}}}}`
		if _, err := cluster.client.AppsV1().DaemonSets(namespace).Patch(ctx, ds, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"rota.dev/e2e-nowhere":"true"}`)
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		patch(`{"rota.dev/e2e-nowhere":null}`)
		if err := cluster.waitForRota(ctx, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(restore)
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cluster.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + ds})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("the driver pod did not go: %v", err)
	}
	out, ok = preflight(ctx, t)
	t.Logf("preflight without the driver:\n%s", out)
	if ok || !strings.Contains(out, "FAIL") {
		t.Errorf("preflight passes with the driver DaemonSet on no node")
	}
	restore()
	if out, ok := preflight(ctx, t); !ok {
		t.Errorf("preflight fails with the driver back:\n%s", out)
	}
}
