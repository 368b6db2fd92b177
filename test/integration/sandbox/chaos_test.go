package sandbox

import (
	"context"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rota-dev/rota/pkg/sandbox/chaos"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestChaosShortSeed is the short chaos run CI makes: 50 SIGKILLs of the
// schedulers, the schedule controllers and the drivers, running as
// processes, while the workload mix plays; no invariant may break.
func TestChaosShortSeed(t *testing.T) {
	bin := framework.BinDir(t, "scheduler", "schedule-controller", "dra-kubelet-plugin")
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx := klog.NewContext(context.Background(), logger)
	const kills = 50
	rep, err := chaos.Run(ctx, chaos.Options{RepoRoot: framework.RepoRoot(t), Dir: t.TempDir(), BinDir: bin, Seed: 17, Kills: kills})
	if err != nil {
		t.Fatalf("chaos run: %v", err)
	}
	var text strings.Builder
	rep.WriteText(&text)
	t.Logf("report:\n%s", text.String())
	total := 0
	for _, n := range rep.Kills {
		total += n
	}
	if total != kills {
		t.Errorf("%d kills sent, want %d", total, kills)
	}
	for _, kind := range []string{chaos.KindScheduler, chaos.KindController, chaos.KindDriver} {
		if rep.Kills[kind] == 0 || rep.Restarts[kind] < rep.Kills[kind] {
			t.Errorf("%s: %d kills, %d restarts; want some kills, each followed by a restart", kind, rep.Kills[kind], rep.Restarts[kind])
		}
	}
	for _, inv := range chaos.Invariants {
		if rep.Checks[inv] == 0 {
			t.Errorf("invariant %s was never checked", inv)
		}
	}
	if rep.DriverRestartsVerified == 0 || rep.PodsCreated == 0 || rep.GPUFaults == 0 || rep.TransitionMutations == 0 {
		t.Errorf("the run did too little: %d driver restarts verified, %d pods, %d GPU faults, %d transition mutations",
			rep.DriverRestartsVerified, rep.PodsCreated, rep.GPUFaults, rep.TransitionMutations)
	}
	for _, v := range rep.Violations {
		t.Errorf("violation of %s at %s: %s", v.Invariant, v.At.Format("15:04:05.000"), v.Detail)
	}
}
