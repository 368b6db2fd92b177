package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rota-dev/rota/pkg/sandbox/cluster"
	"github.com/rota-dev/rota/pkg/sim/vclock"
)

func up(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodesFlag := fs.String("nodes", "dgx-h100:1,dgx-a100:1", "Simulated nodes as profile:count, comma-separated (profiles: dgx-h100, dgx-a100, hgx-h200, dgx-b200, l4x2, or a list such as h100:4,a100:4 for one node).")
	dir := fs.String("dir", "", "Directory for the control plane's data, the kubeconfig and sandbox.log (default: a new temporary directory).")
	repo := fs.String("repo", "", "Rota repository holding manifests/ (default: found from the working directory).")
	verbosity := fs.Int("v", 2, "Log verbosity of sandbox.log.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nodes, err := cluster.ParseNodes(*nodesFlag)
	if err != nil {
		return err
	}
	root, err := repoRoot(*repo)
	if err != nil {
		return err
	}
	if *dir == "" {
		*dir = defaultDir()
	}
	ctx, err = setupLogging(ctx, fs, *dir, *verbosity)
	if err != nil {
		return err
	}
	// Serving interactively, the sandbox's clock is a virtual clock that
	// follows real time.
	clk := vclock.New(time.Now())
	clusterDir := filepath.Join(*dir, "cluster")
	if err := os.RemoveAll(clusterDir); err != nil {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Options{RepoRoot: root, Dir: clusterDir, Nodes: nodes, Clock: clk,
		Kubelet:    cluster.KubeletTiming{StartDelay: 2 * time.Second, ReadyDelay: 3 * time.Second, MaxGracePeriod: 30 * time.Second},
		PassPeriod: 30 * time.Second})
	if err != nil {
		return err
	}
	defer c.Stop()
	fmt.Fprintf(stdout, "Rota sandbox up with %d node(s):\n", len(nodes))
	for _, n := range nodes {
		fmt.Fprintf(stdout, "  %s (%s)\n", n.Name, n.Profile)
	}
	fmt.Fprintf(stdout, "\n  export KUBECONFIG=%s\n  kubectl get resourceslices\n\nLogs: %s. Ctrl-C stops the sandbox.\n",
		c.Kubeconfig, filepath.Join(*dir, "sandbox.log"))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout, "Stopping.")
			return nil
		case now := <-tick.C:
			clk.SetTime(now)
		}
	}
}
