package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rota-dev/rota/pkg/sandbox/report"
	"github.com/rota-dev/rota/pkg/sandbox/run"
	"github.com/rota-dev/rota/pkg/sandbox/scenario"
	"github.com/rota-dev/rota/test/integration/framework"
)

// playScenario runs one shipped scenario and fails the test for every
// expectation that did not hold.
func playScenario(t *testing.T, name string) *report.Report {
	t.Helper()
	root := framework.RepoRoot(t)
	sc, err := scenario.Load(filepath.Join(root, "examples", "scenarios", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx := klog.NewContext(context.Background(), logger)
	dir := t.TempDir()
	rep, err := run.Run(ctx, run.Options{RepoRoot: root, Dir: filepath.Join(dir, "cluster"), Scenario: sc, Timeline: filepath.Join(dir, name+".html")})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var text strings.Builder
	rep.WriteText(&text)
	t.Logf("report:\n%s", text.String())
	want := 0
	for _, ev := range sc.Events {
		if ev.Checkpoint != nil {
			want++
		}
	}
	if len(rep.Checkpoints) != want {
		t.Errorf("%d checkpoints reported, want %d", len(rep.Checkpoints), want)
	}
	for _, cp := range rep.Checkpoints {
		for _, f := range cp.Failures {
			t.Errorf("checkpoint %s: %s", cp.Name, f)
		}
	}
	if _, err := os.Stat(rep.Timeline); err != nil {
		t.Errorf("timeline: %v", err)
	}
	return rep
}

func TestScenarioFallback(t *testing.T) {
	rep := playScenario(t, "fallback")
	if !rep.Passed {
		t.Error("report says FAIL")
	}
}

func TestScenarioFallbackL4Only(t *testing.T) {
	playScenario(t, "fallback-l4-only")
}

func TestScenarioWeekSwap(t *testing.T) {
	rep := playScenario(t, "week-swap")
	if len(rep.Transitions) != 12 {
		t.Errorf("%d transitions, want 12", len(rep.Transitions))
	}
	if rep.MaxGPUsInUse > 10 {
		t.Errorf("%d GPUs in use at once, want at most 10", rep.MaxGPUsInUse)
	}
	// Every transition releases before it acquires, at 08:00, 13:00, 15:00
	// or 18:00 local time.
	for _, tr := range rep.Transitions {
		local := tr.At.In(rep.Start.Location())
		if h := local.Hour(); local.Minute() != 0 || (h != 8 && h != 13 && h != 15 && h != 18) {
			t.Errorf("transition at %s", local)
		}
		if len(tr.Steps) != 2 || tr.Steps[0].Group != "Release" || tr.Steps[1].Group != "Acquire" {
			t.Errorf("transition at %s: steps %+v, want a release then an acquire", local, tr.Steps)
		}
	}
}
