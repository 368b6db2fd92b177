package sandbox

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rota-dev/rota/pkg/sandbox/report"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestMain removes the binaries the package's tests built.
func TestMain(m *testing.M) { os.Exit(framework.RunTests(m)) }

// TestSandboxBinaryRunsScenario plays a shipped scenario with the built
// binary (the one `make build` writes, with -trimpath) and reads its JSON
// report.
func TestSandboxBinaryRunsScenario(t *testing.T) {
	bin := framework.Binary(t, "rota-sandbox")
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
