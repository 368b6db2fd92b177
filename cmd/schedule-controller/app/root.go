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
		Short: "Rota's DeploySchedule tool: offline timeline today, the controller later",
		Long: `schedule-controller is Rota's tool for DeploySchedules, which swap workloads on
a GPU pool by the clock.

The controller that executes schedules on a cluster is not part of this build
yet. What is here today works without a cluster:

  timeline   evaluate a DeploySchedule file over a time range and print every
             intent interval and transition plan (a dry run)
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
	root.AddCommand(newTimelineCommand(), newVersionCommand())
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
