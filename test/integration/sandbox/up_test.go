package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rota-dev/rota/pkg/sandbox/apply"
	"github.com/rota-dev/rota/test/integration/framework"
)

// lines collects a process's output and tells when a line has a prefix.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) read(r *bufio.Scanner, done chan<- struct{}) {
	defer close(done)
	for r.Scan() {
		l.mu.Lock()
		l.all = append(l.all, r.Text())
		l.mu.Unlock()
	}
}

func (l *lines) find(prefix string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.all {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s), prefix); ok {
			return rest, true
		}
	}
	return "", false
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// TestSandboxUp runs `rota-sandbox up --nodes dgx-h100:2,dgx-a100:1` (the
// built binary), uses the kubeconfig it prints to place a pod whose claim
// asks for an H100 else an A100, sees it Running on an H100 node, then
// interrupts the sandbox and expects a clean exit.
func TestSandboxUp(t *testing.T) {
	bin := framework.Binary(t, "rota-sandbox")
	dir := t.TempDir()
	cmd := exec.Command(bin, "up", "--nodes", "dgx-h100:2,dgx-a100:1", "--dir", dir)
	cmd.Dir = framework.RepoRoot(t)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	out := &lines{}
	outDone := make(chan struct{})
	go out.read(bufio.NewScanner(pipe), outDone)
	exited := make(chan error, 1)
	go func() {
		<-outDone
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			t.Logf("rota-sandbox killed: %v", <-exited)
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "sandbox.log"))
			t.Logf("stdout:\n%s\nstderr:\n%s\nsandbox.log (tail):\n%s", out, stderr.String(), tail(log, 6000))
		}
	})

	// The sandbox prints the kubeconfig once every node's GPUs are published.
	var kubeconfig string
	deadline := time.Now().Add(4 * time.Minute)
	for kubeconfig == "" {
		if path, ok := out.find("export KUBECONFIG="); ok {
			kubeconfig = path
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("rota-sandbox up exited before it was up: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("rota-sandbox up printed no kubeconfig within 4 minutes")
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	nodes := []string{"dgx-h100-0", "dgx-h100-1", "dgx-a100-0"}
	framework.WaitFor(t, "every node's ResourceSlice", func(ctx context.Context) (bool, string, error) {
		slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		devices := map[string]int{}
		for _, s := range slices.Items {
			if s.Spec.Driver == "gpu.rota.dev" && s.Spec.NodeName != nil {
				devices[*s.Spec.NodeName] += len(s.Spec.Devices)
			}
		}
		for _, n := range nodes {
			if devices[n] != 8 {
				return false, fmt.Sprintf("GPUs per node: %v", devices), nil
			}
		}
		return true, "", nil
	})

	// What a user does: apply a claim template and a pod.
	applier, err := apply.NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, f := range []string{"claimtemplate.yaml", "train-1.yaml"} {
		if err := applier.ApplyFile(ctx, filepath.Join(framework.RepoRoot(t), "examples", "scenarios", "fallback", f)); err != nil {
			t.Fatal(err)
		}
	}
	var pod *v1.Pod
	framework.WaitFor(t, "ml/train-1 to run", func(ctx context.Context) (bool, string, error) {
		pod, err = client.CoreV1().Pods("ml").Get(ctx, "train-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return pod.Status.Phase == v1.PodRunning, fmt.Sprintf("phase %s on %q", pod.Status.Phase, pod.Spec.NodeName), nil
	})
	if !strings.HasPrefix(pod.Spec.NodeName, "dgx-h100-") {
		t.Errorf("train-1 runs on %s, want an H100 node", pod.Spec.NodeName)
	}
	if model := allocatedModel(t, client, pod); model != "H100" {
		t.Errorf("train-1 holds a %q, want an H100", model)
	}

	// Ctrl-C: the sandbox stops every component and exits 0.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("rota-sandbox up exited with %v after an interrupt, want 0", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("rota-sandbox up still running 2 minutes after an interrupt")
	}
	t.Logf("stopped %.1fs after the interrupt", time.Since(begin).Seconds())
	if _, ok := out.find("Stopping."); !ok {
		t.Errorf("no 'Stopping.' on stdout")
	}
	if s := stderr.String(); strings.Contains(s, "panic") || strings.Contains(s, "DATA RACE") {
		t.Errorf("stderr:\n%s", s)
	}
	reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().List(reqCtx, metav1.ListOptions{}); err == nil {
		t.Errorf("the API server still answers after the sandbox stopped")
	} else if errors.Is(err, context.DeadlineExceeded) {
		t.Logf("API server request timed out after stop (nothing listening): %v", err)
	}
}

// allocatedModel is the model attribute of the device the pod's claim
// "gpu" was allocated.
func allocatedModel(t *testing.T, client kubernetes.Interface, pod *v1.Pod) string {
	t.Helper()
	ctx := context.Background()
	var claimName string
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == "gpu" && s.ResourceClaimName != nil {
			claimName = *s.ResourceClaimName
		}
	}
	if claimName == "" {
		t.Fatalf("pod %s has no generated claim", pod.Name)
	}
	claim, err := client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s: allocation %+v, want one device", claimName, claim.Status.Allocation)
	}
	res := claim.Status.Allocation.Devices.Results[0]
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		if s.Spec.Driver != res.Driver || s.Spec.Pool.Name != res.Pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes["model"]; d.Name == res.Device && ok && a.StringValue != nil {
				return *a.StringValue
			}
		}
	}
	return ""
}
