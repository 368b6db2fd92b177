package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rota-dev/rota/pkg/sandbox/chaos"
	"github.com/rota-dev/rota/pkg/sandbox/cluster"
)

func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "Seed of every random choice (kills, downtimes, pod churn, GPU faults); the same seed replays the same decisions.")
	kills := fs.Int("kills", 50, "How many components to SIGKILL.")
	nodesFlag := fs.String("nodes", "", "Simulated nodes as name=profile[+cm], comma-separated (+cm: consumable memory), "+
		"default h100-0=dgx-h100,a100-0=dgx-a100,h200-0=hgx-h200+cm. The reservation needs h200-0 with consumable memory.")
	minGap := fs.Duration("min-gap", chaos.DefaultTiming().MinGap, "Shortest wait between a component's restart and the next kill.")
	maxGap := fs.Duration("max-gap", chaos.DefaultTiming().MaxGap, "Longest wait between a component's restart and the next kill.")
	maxDown := fs.Duration("max-down", chaos.DefaultTiming().MaxDown, "Longest time a killed component stays down.")
	settle := fs.Duration("settle", 3*time.Minute, "How long the components may take to settle after the last kill, and again after the teardown.")
	reportPath := fs.String("report", "", "Where to write the JSON report (default: <dir>/chaos-report.json).")
	binDir := fs.String("bin-dir", os.Getenv("ROTA_BIN_DIR"), "Directory of the built scheduler, schedule-controller and dra-kubelet-plugin (default: $ROTA_BIN_DIR, else <repo>/bin).")
	dir := fs.String("dir", "", "Directory for the control plane's data, the components' logs and sandbox.log (default: a new temporary directory).")
	repo := fs.String("repo", "", "Rota repository holding manifests/ and examples/ (default: found from the working directory).")
	verbosity := fs.Int("v", 1, "Log verbosity of sandbox.log.")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() > 0 {
		return 2, fmt.Errorf("chaos: unexpected arguments %q", fs.Args())
	}
	var nodes []cluster.NodeSpec
	if *nodesFlag != "" {
		var err error
		if nodes, err = chaos.ParseNodes(*nodesFlag); err != nil {
			return 2, err
		}
	}
	root, err := repoRoot(*repo)
	if err != nil {
		return 1, err
	}
	if *binDir == "" {
		*binDir = filepath.Join(root, "bin")
	}
	if *dir == "" {
		*dir = defaultDir()
	}
	for _, p := range []*string{dir, binDir, reportPath} {
		if *p != "" {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
	if *reportPath == "" {
		*reportPath = filepath.Join(*dir, "chaos-report.json")
	}
	ctx, err = setupLogging(ctx, fs, *dir, *verbosity)
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(stdout, "Chaos run, seed %d, %d kills; logs under %s\n", *seed, *kills, *dir)
	rep, err := chaos.Run(ctx, chaos.Options{
		RepoRoot: root, Dir: *dir, BinDir: *binDir, Seed: *seed, Kills: *kills, Nodes: nodes,
		Timing: chaos.Timing{MinGap: *minGap, MaxGap: *maxGap, MaxDown: *maxDown}, Settle: *settle, Progress: stdout,
	})
	if err != nil {
		return 1, err
	}
	f, err := os.Create(*reportPath)
	if err != nil {
		return 1, err
	}
	if err := rep.WriteJSON(f); err != nil {
		_ = f.Close()
		return 1, err
	}
	if err := f.Close(); err != nil {
		return 1, err
	}
	fmt.Fprintln(stdout)
	rep.WriteText(stdout)
	fmt.Fprintf(stdout, "\nReport: %s\n", *reportPath)
	if !rep.Passed() {
		return 1, nil
	}
	return 0, nil
}
