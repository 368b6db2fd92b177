package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rota-dev/rota/pkg/sandbox/run"
	"github.com/rota-dev/rota/pkg/sandbox/scenario"
)

func runScenario(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("scenario", "", "Scenario file (docs/scenarios.md). Required.")
	format := fs.String("report", "text", "Report format: text or json.")
	timelinePath := fs.String("timeline", "", "Where to write the HTML timeline (default: <dir>/<scenario>.html).")
	dir := fs.String("dir", "", "Directory for the control plane's data, the kubeconfig and sandbox.log (default: a new temporary directory).")
	repo := fs.String("repo", "", "Rota repository holding manifests/ (default: found from the working directory).")
	verbosity := fs.Int("v", 1, "Log verbosity of sandbox.log.")
	quiet := fs.Bool("quiet", false, "Print no progress lines on standard error (the report is printed either way).")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if *file == "" {
		return 2, fmt.Errorf("run: --scenario is required")
	}
	if *format != "text" && *format != "json" {
		return 2, fmt.Errorf("run: --report: %q is not text or json", *format)
	}
	sc, err := scenario.Load(*file)
	if err != nil {
		return 2, err
	}
	root, err := repoRoot(*repo)
	if err != nil {
		return 1, err
	}
	if *dir == "" {
		*dir = defaultDir()
	}
	if *timelinePath == "" {
		*timelinePath = filepath.Join(*dir, strings.ReplaceAll(sc.Name, "/", "-")+".html")
	}
	if abs, err := filepath.Abs(*timelinePath); err == nil {
		*timelinePath = abs
	}
	ctx, err = setupLogging(ctx, fs, *dir, *verbosity)
	if err != nil {
		return 1, err
	}
	// Every run starts from an empty cluster.
	clusterDir := filepath.Join(*dir, "cluster")
	if err := os.RemoveAll(clusterDir); err != nil {
		return 1, err
	}
	opts := run.Options{RepoRoot: root, Dir: clusterDir, Scenario: sc, Timeline: *timelinePath}
	if !*quiet {
		opts.Progress = stderr
	}
	rep, err := run.Run(ctx, opts)
	if err != nil {
		return 1, err
	}
	if *format == "json" {
		if err := rep.WriteJSON(stdout); err != nil {
			return 1, err
		}
	} else {
		rep.WriteText(stdout)
	}
	if !rep.Passed {
		return 1, nil
	}
	return 0, nil
}
