// Command rota-sandbox runs Rota locally: an in-process control plane with
// Rota's scheduler and controllers and simulated GPU nodes, each with the
// real gpu.rota.dev kubelet plugin on mock NVML.
//
//	rota-sandbox up --nodes dgx-h100:2,dgx-a100:1   # serve until interrupted
//	rota-sandbox run --scenario FILE [--report json] # play a scenario on a virtual clock
//	rota-sandbox chaos --seed 7 --kills 1000          # kill real component processes, check invariants
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `rota-sandbox: a local Rota cluster with simulated GPU nodes.

Commands:
  up   --nodes dgx-h100:2,dgx-a100:1 [--dir DIR]
       Start the sandbox and serve until interrupted; prints the kubeconfig path.
  run  --scenario FILE [--report text|json] [--timeline FILE.html] [--dir DIR]
       Play a scenario on a virtual clock and print its report; exit 1 if an
       expectation failed.
  chaos --seed N --kills K [--nodes ...] [--report FILE] [--bin-dir DIR] [--dir DIR]
       Run the scheduler, the schedule controller and one driver per node as
       processes from the built binaries, SIGKILL them at seeded random
       moments while a workload plays, check Rota's invariants all along;
       exit 1 on any violation.
Run 'rota-sandbox COMMAND -h' for the flags of a command.
`

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	code := 0
	switch args[0] {
	case "up":
		err = up(ctx, args[1:], stdout, stderr)
	case "run":
		code, err = runScenario(ctx, args[1:], stdout, stderr)
	case "chaos":
		code, err = runChaos(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "rota-sandbox: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "rota-sandbox: %v\n", err)
		return 1
	}
	return code
}

// setupLogging sends klog's output to dir/sandbox.log at verbosity v, so
// that the report is not buried in component logs.
func setupLogging(ctx context.Context, fs *flag.FlagSet, dir string, v int) (context.Context, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return ctx, fmt.Errorf("sandbox directory: %w", err)
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for name, value := range map[string]string{
		"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL",
		"log_file": filepath.Join(dir, "sandbox.log"), "one_output": "true", "v": fmt.Sprint(v),
	} {
		if err := klogFlags.Set(name, value); err != nil {
			return ctx, err
		}
	}
	_ = fs
	return klog.NewContext(ctx, klog.Background()), nil
}

func defaultDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("rota-sandbox-%d", os.Getpid()))
}

// repoRoot is the directory holding manifests/: --repo, else the first
// directory upwards from the working directory that has manifests/crds.
func repoRoot(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "manifests", "crds")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("manifests/crds not found above the working directory; run from the Rota repository or pass --repo")
		}
		dir = parent
	}
}
