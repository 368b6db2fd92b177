package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rota-dev/rota/pkg/advisor"
	"github.com/rota-dev/rota/pkg/defrag"
)

// defragFlags are the defrag command's own flags.
type defragFlags struct {
	plan, apply, allNamespaces bool
	dryRun, approved           string
	timeout                    time.Duration
}

func newDefragCommand(o *options) *cobra.Command {
	f := &defragFlags{}
	cmd := &cobra.Command{
		Use:   "defrag [--plan | --apply | --dry-run=server] [-A]",
		Short: "The moves that would admit every waiting pod or gang, in order, with their cost; --apply evicts them one at a time",
		Long: `defrag reads the cluster (GPUs, claims, pods, PodDisruptionBudgets), builds the
unblock advisor's snapshot from it as the scheduler does, and plans, for every
waiting pod or gang of the namespace (-A: of every namespace), the cheapest
set of running workloads to evict so that it fits: higher priority first, then
the oldest, each planned in the cluster as the earlier moves leave it.

--plan (the default) prints the plan. --apply evicts its pods through the
Eviction API, so PodDisruptionBudgets are enforced by the API server, one
workload at a time: before each step it checks the pods are the planned ones,
after it waits until they are gone (--timeout), plans again and stops at the
first difference or refused eviction. --dry-run=server sends the evictions
with dryRun=All: the API server checks them and evicts nothing. defrag never
deletes a pod. --approved FILE (a plan from --plan -o json) makes --apply and
--dry-run=server evict nothing unless the cluster's plan is still that one. See docs/admission.md ("Defragmentation").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, o)
		},
	}
	cmd.Flags().BoolVar(&f.plan, "plan", false, "print the plan and change nothing (the default)")
	cmd.Flags().BoolVar(&f.apply, "apply", false, "evict the plan's pods through the Eviction API, one workload at a time")
	cmd.Flags().StringVar(&f.dryRun, "dry-run", "none", `"server": send the evictions with dryRun=All and report what the API server says; "none": off`)
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "plan for the waiting pods of every namespace")
	cmd.Flags().StringVar(&f.approved, "approved", "", "with --apply or --dry-run=server, a plan written by --plan -o json: evict nothing unless the cluster's plan evicts exactly those pods (by UID), in that order")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Minute, "with --apply, how long to wait for each evicted workload to go and free its GPUs")
	return cmd
}

// readPlan reads a plan written by --plan -o json.
func readPlan(path string) (*defrag.Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--approved: %w", err)
	}
	var p defrag.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("--approved %s is not a plan written by `kubectl rota defrag --plan -o json`: %w", path, err)
	}
	return &p, nil
}

// validate checks the flags together.
func (f *defragFlags) validate(o *options) error {
	if err := o.validate(); err != nil {
		return err
	}
	switch f.dryRun {
	case "none", "server":
	case "client":
		return errors.New(`--dry-run=client is what --plan does: use --plan, or --dry-run=server to have the API server check the evictions`)
	default:
		return fmt.Errorf(`--dry-run %q is not supported: use "server" or "none"`, f.dryRun)
	}
	switch {
	case f.plan && f.apply:
		return errors.New("--plan and --apply exclude each other")
	case f.plan && f.dryRun == "server":
		return errors.New("--dry-run=server sends the evictions (without evicting): use it without --plan")
	case f.timeout <= 0:
		return fmt.Errorf("--timeout %s must be positive", f.timeout)
	case f.approved != "" && !f.apply && f.dryRun != "server":
		return errors.New("--approved is for --apply or --dry-run=server: it names the plan they may carry out")
	case o.output != "" && (f.apply || f.dryRun == "server"):
		return fmt.Errorf("--output %s is only for --plan: --apply and --dry-run=server report each step as text", o.output)
	}
	return nil
}

func (f *defragFlags) run(cmd *cobra.Command, o *options) error {
	if err := f.validate(o); err != nil {
		return err
	}
	client, _, ns, err := o.clients()
	if err != nil {
		return err
	}
	if f.allNamespaces {
		ns = ""
	}
	ctx := cmd.Context()
	objs, err := defrag.Read(ctx, client)
	if err != nil {
		return err
	}
	plan, err := defrag.Make(ctx, objs, ns, advisor.Options{})
	if err != nil {
		return err
	}
	switch o.output {
	case "json":
		return writeJSON(o.streams.Out, plan)
	case "yaml":
		return writeYAML(o.streams.Out, plan)
	}
	if err := defrag.WriteText(o.streams.Out, plan); err != nil {
		return err
	}
	if !f.apply && f.dryRun != "server" {
		return nil
	}
	if f.approved != "" {
		approved, err := readPlan(f.approved)
		if err != nil {
			return err
		}
		if diff := plan.Differs(approved); diff != "" {
			return fmt.Errorf("the cluster's plan is not the approved plan %s, nothing evicted: %s", f.approved, diff)
		}
	}
	if len(plan.Evictions) == 0 {
		fmt.Fprintln(o.streams.Out, "\nNo eviction to make.")
		return nil
	}
	fmt.Fprintln(o.streams.Out)
	err = defrag.Apply(ctx, client, plan, defrag.ApplyOptions{
		DryRun: f.dryRun == "server", Namespace: ns, Timeout: f.timeout, Out: o.streams.Out})
	if err != nil {
		return err
	}
	if f.dryRun == "server" {
		fmt.Fprintln(o.streams.Out, "Dry run: the API server accepted every eviction; nothing was evicted.")
	} else {
		fmt.Fprintf(o.streams.Out, "Done: every planned pod evicted (%d); the scheduler places the waiting pods.\n", len(plan.Evictions))
	}
	return nil
}
