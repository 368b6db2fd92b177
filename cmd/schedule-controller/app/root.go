// Package app holds the schedule-controller command line, kept apart from main so
// tests run it in-process.
package app

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/rota-dev/rota/pkg/version"
)

// errReported marks an error whose details were already written to stderr.
var errReported = errors.New("invalid input")

// Run executes the command line args and returns the process exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	cmd := NewRootCommand(stdout, stderr)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

// NewRootCommand returns the schedule-controller command writing to stdout and
// stderr.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "schedule-controller",
		Short: "Rota's DeploySchedule controller and its offline timeline",
		Long: `schedule-controller runs Rota's DeploySchedule controller, which swaps workloads
on a GPU pool by the clock, and offers a dry run that needs no cluster:

  run        run the controllers against a cluster, with leader election
  webhook-certs
             issue or renew the target webhook's serving certificate (a Job)
  timeline   evaluate a DeploySchedule file over a time range and print every
             intent interval and transition plan (a dry run)
  forecast   set schedules' GPU demand over a time range against a pool of
             node profiles, and name every over-committed window (a dry run)
  version    print the Rota build`,
		// Runnable, so that an unknown subcommand is an error, not a help page.
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCommand(), newTimelineCommand(), newForecastCommand(), newWebhookCertsCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the Rota build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Get().String())
			return err
		},
	}
}
