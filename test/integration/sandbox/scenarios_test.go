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
	}
	assertReleaseFirst(t, rep)
}

// assertReleaseFirst checks that every transition of rep released before it
// acquired.
func assertReleaseFirst(t *testing.T, rep *report.Report) {
	t.Helper()
	for _, tr := range rep.Transitions {
		if len(tr.Steps) != 2 || tr.Steps[0].Group != "Release" || tr.Steps[1].Group != "Acquire" {
			t.Errorf("transition at %s: steps %+v, want a release then an acquire", tr.At.In(rep.Start.Location()), tr.Steps)
		}
	}
}

// checkpoint returns the named checkpoint of rep.
func checkpoint(t *testing.T, rep *report.Report, name string) report.Checkpoint {
	t.Helper()
	for _, cp := range rep.Checkpoints {
		if cp.Name == name {
			return cp
		}
	}
	t.Fatalf("no checkpoint %s", name)
	return report.Checkpoint{}
}

// podNodes are the nodes the running pods whose names start with prefix
// are on.
func podNodes(cp report.Checkpoint, prefix string) []string {
	var nodes []string
	for _, p := range cp.Pods {
		if strings.HasPrefix(p.Name, prefix) && p.Phase == "Running" {
			nodes = append(nodes, p.Node)
		}
	}
	return nodes
}

func TestScenarioMultiReplica(t *testing.T) {
	rep := playScenario(t, "multi-replica")
	if len(rep.Transitions) != 3 {
		t.Errorf("%d transitions, want 3 (Mon 08:00, Mon 18:00, Tue 08:00)", len(rep.Transitions))
	}
	if rep.MaxGPUsInUse > 16 {
		t.Errorf("%d GPUs in use at once, want at most 16", rep.MaxGPUsInUse)
	}
	assertReleaseFirst(t, rep)
	// In business hours llama70b holds both nodes; in the evening
	// md-qwen-8gpu runs on the node the second replica left.
	for _, name := range []string{"mon-0830-business-hours", "tue-0830-business-hours"} {
		if got := podNodes(checkpoint(t, rep, name), "serving/md-llama70b-"); len(got) != 2 || got[0] == got[1] {
			t.Errorf("%s: llama70b on %v, want one replica on each node", name, got)
		}
	}
	evening := checkpoint(t, rep, "mon-1830-evening")
	llama, qwen := podNodes(evening, "serving/md-llama70b-"), podNodes(evening, "serving/md-qwen-8gpu-")
	if len(llama) != 1 || len(qwen) != 1 || llama[0] == qwen[0] {
		t.Errorf("mon-1830-evening: llama70b on %v, md-qwen-8gpu on %v; want one each, on different nodes", llama, qwen)
	}
}

func TestScenarioFragmentation(t *testing.T) {
	rep := playScenario(t, "fragmentation")
	if rep.MaxGPUsInUse > 4 {
		t.Errorf("%d GPUs in use at once, want at most 4", rep.MaxGPUsInUse)
	}
	// B's gang: its reason code at t=0 and t=10, both ranks on n1 at t=12.
	for name, want := range map[string]string{"t0-insufficient-capacity": "InsufficientCapacity", "t10-topology-fragmentation": "TopologyFragmentation"} {
		for _, p := range checkpoint(t, rep, name).Pods {
			if strings.HasPrefix(p.Name, "team-b/") && (p.Waiting == nil || p.Waiting.Code != want) {
				t.Errorf("%s: %s waiting %+v, want code %s", name, p.Name, p.Waiting, want)
			}
		}
	}
	if got := podNodes(checkpoint(t, rep, "t12-b-admitted-on-n1"), "team-b/"); len(got) != 2 || got[0] != "n1" || got[1] != "n1" {
		t.Errorf("t12: B's ranks on %v, want both on n1", got)
	}
	if done := checkpoint(t, rep, "t32-b-done"); done.GPUsInUse != 1 {
		t.Errorf("t32: %d GPUs in use, want 1 (A's remaining replica)", done.GPUsInUse)
	}
}

func TestScenarioFragmentationConflict(t *testing.T) {
	rep := playScenario(t, "fragmentation-conflict")
	if got := podNodes(checkpoint(t, rep, "t30-still-no-placement"), "team-b/"); len(got) != 0 {
		t.Errorf("t30: B's ranks run on %v, want them waiting", got)
	}
}

// TestScenarioStartFailed: a pod placed on a node whose driver refuses its
// claim at prepare waits with StartFailed and the driver's message, not in
// silence; once its Deployment asks for a claim the driver can prepare,
// the new pod runs.
func TestScenarioStartFailed(t *testing.T) {
	rep := playScenario(t, "start-failed")
	if !rep.Passed {
		t.Error("report says FAIL")
	}
}
