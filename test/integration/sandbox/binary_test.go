package sandbox

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rota-dev/rota/pkg/sandbox/report"
	"github.com/rota-dev/rota/test/integration/framework"
)

// The binary a test built, shared by the package's tests; TestMain
// removes it.
var (
	buildOnce  sync.Once
	builtDir   string
	builtPath  string
	builtError error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// sandboxBinary returns rota-sandbox from `make build` (ROTA_BIN_DIR), or
// builds one the way `make build` does (-trimpath), once per test binary.
// -trimpath matters: kube-apiserver's test server finds its certificate
// fixtures by its source path, which -trimpath makes module-relative
// (pkg/sandbox/controlplane handles that).
func sandboxBinary(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("ROTA_BIN_DIR"); dir != "" {
		bin := filepath.Join(dir, "rota-sandbox")
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("ROTA_BIN_DIR=%s has no rota-sandbox binary (run 'make build'): %v", dir, err)
		}
		return bin
	}
	buildOnce.Do(func() {
		var err error
		if builtDir, err = os.MkdirTemp("", "rota-sandbox-bin-"); err != nil {
			builtError = err
			return
		}
		builtPath = filepath.Join(builtDir, "rota-sandbox")
		cmd := exec.Command("go", "build", "-trimpath", "-o", builtPath, "./cmd/rota-sandbox")
		cmd.Dir = framework.RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			builtError = err
			builtPath = string(out)
		}
	})
	if builtError != nil {
		t.Fatalf("go build -trimpath ./cmd/rota-sandbox: %v\n%s", builtError, builtPath)
	}
	return builtPath
}

// TestSandboxBinaryRunsScenario plays a shipped scenario with the built
// binary (the one `make build` writes, with -trimpath) and reads its JSON
// report.
func TestSandboxBinaryRunsScenario(t *testing.T) {
	bin := sandboxBinary(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "run", "--scenario", "examples/scenarios/fallback-l4-only.yaml", "--report", "json", "--dir", dir)
	cmd.Dir = framework.RepoRoot(t)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "sandbox.log"))
		t.Fatalf("%s run: %v\nstdout:\n%s\nstderr:\n%s\nsandbox.log (tail):\n%s", bin, err, stdout.String(), stderr.String(), tail(log, 4000))
	}
	var rep report.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--report json is not one JSON document: %v\n%s", err, stdout.String())
	}
	if rep.SchemaVersion != report.SchemaVersion || !rep.Passed || len(rep.Checkpoints) != 1 {
		t.Errorf("report: schema %q, passed %v, %d checkpoints; want %s, true, 1", rep.SchemaVersion, rep.Passed, len(rep.Checkpoints), report.SchemaVersion)
	}
	if _, err := os.Stat(filepath.Join(dir, "fallback-l4-only.html")); err != nil {
		t.Errorf("timeline: %v", err)
	}
	t.Logf("scenario played by %s in %.1fs (simulated %s)", bin, rep.WallSeconds, rep.End.Sub(rep.Start))
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
