package admission

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rota-dev/rota/test/integration/framework"
)

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
	buildOut  []byte
)

// kubectlRota returns the kubectl-rota binary built by `make build`
// (ROTA_BIN_DIR), or builds one once for this test binary.
func kubectlRota(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("ROTA_BIN_DIR"); dir != "" {
		bin := filepath.Join(dir, "kubectl-rota")
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("ROTA_BIN_DIR=%s has no kubectl-rota binary (run 'make build'): %v", dir, err)
		}
		return bin
	}
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "kubectl-rota-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(builtDir, "kubectl-rota"), "./cmd/kubectl-rota")
		cmd.Dir = framework.RepoRoot(t)
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/kubectl-rota: %v\n%s", buildErr, buildOut)
	}
	return filepath.Join(builtDir, "kubectl-rota")
}

// runKubectlRota runs `kubectl rota args...` against the control plane.
func runKubectlRota(t *testing.T, cp *framework.ControlPlane, args ...string) string {
	t.Helper()
	cmd := exec.Command(kubectlRota(t), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl rota %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkKubectlRota shows, in the §8.5 scenario at t=10, what an operator
// sees: why B waits, and the pool with its holders.
func checkKubectlRota(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	why := runKubectlRota(t, cp, "why", "b-rank-0", "-n", "team-b")
	t.Logf("kubectl rota why b-rank-0 -n team-b:\n%s", why)
	for _, want := range []string{"Reason:   TopologyFragmentation", "largest free block 1 on n1", "preemption would not help"} {
		if !strings.Contains(why, want) {
			t.Errorf("kubectl rota why: missing %q", want)
		}
	}
	for _, line := range strings.Split(why, "\n") {
		if len(line) > 100 {
			t.Errorf("kubectl rota why: line wider than 100 columns: %q", line)
		}
	}
	var report struct {
		Reason  string `json:"reason"`
		Waiting bool   `json:"waiting"`
	}
	if err := json.Unmarshal([]byte(runKubectlRota(t, cp, "why", "b-rank-0", "-n", "team-b", "-o", "json")), &report); err != nil {
		t.Fatalf("kubectl rota why -o json: %v", err)
	}
	if report.Reason != "TopologyFragmentation" || !report.Waiting {
		t.Errorf("kubectl rota why -o json: %+v, want waiting with TopologyFragmentation", report)
	}
	pool := runKubectlRota(t, cp, "pool")
	t.Logf("kubectl rota pool:\n%s", pool)
	for _, want := range []string{"n1    gpu-0", "team-a/a-", "GPU-n2-1", "Healthy"} {
		if !strings.Contains(pool, want) {
			t.Errorf("kubectl rota pool: missing %q", want)
		}
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(runKubectlRota(t, cp, "pool", "-o", "json")), &rows); err != nil || len(rows) != 4 {
		t.Errorf("kubectl rota pool -o json: %d rows, err %v; want 4", len(rows), err)
	}
}
