package app

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/timelineprint"
	"github.com/rota-dev/rota/pkg/schedule/validation"
)

// Output formats of the timeline command.
const (
	outputTable = "table"
	outputJSON  = "json"
)

type timelineOptions struct {
	file, from, to, output string
}

func newTimelineCommand() *cobra.Command {
	o := &timelineOptions{output: outputTable}
	cmd := &cobra.Command{
		Use:   "timeline --file FILE --from RFC3339 --to RFC3339 [--output table|json]",
		Short: "Print a schedule's intent intervals and transitions over a time range, without a cluster",
		Long: `timeline evaluates the DeploySchedule in FILE over [--from, --to) exactly as the
controller will, and prints every intent interval (per target: state, replicas,
consent to downtime, and the window it comes from) and every transition plan
(the ordered Stop/Start/Scale steps). It reads no cluster and no clock.

The file is validated first, with the same rules as the API server plus the
equal-priority overlaps that only evaluation finds; on any error the command
prints each one with its field path on stderr, nothing on stdout, and exits 1.

--output table (default) is for people: local times in the schedule's zone.
--output json prints one JSON object per line: all intervals, sorted by start
then target name, then all transitions in time order.`,
		Example: `  schedule-controller timeline --file examples/deployschedule-week.yaml \
    --from 2026-10-19T00:00:00+07:00 --to 2026-10-26T00:00:00+07:00`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	flags := cmd.Flags()
	flags.StringVarP(&o.file, "file", "f", "", "YAML file holding one DeploySchedule (required)")
	flags.StringVar(&o.from, "from", "", "start of the range, RFC 3339, included (required)")
	flags.StringVar(&o.to, "to", "", "end of the range, RFC 3339, excluded (required)")
	flags.StringVarP(&o.output, "output", "o", o.output, "output format: table or json")
	for _, name := range []string{"file", "from", "to"} {
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic(err) // a flag defined just above; only a typo gets here
		}
	}
	return cmd
}

func (o *timelineOptions) run(stdout, stderr io.Writer) error {
	from, to, errs := o.parseFlags()
	if len(errs) > 0 {
		return report(stderr, "invalid flags", errs)
	}
	data, err := os.ReadFile(o.file)
	if err != nil {
		return fmt.Errorf("reading schedule: %w", err)
	}
	ds, errs := validation.DecodeDeploySchedule(data)
	if len(errs) > 0 {
		return report(stderr, o.file, errs)
	}
	if fieldErrs := validation.ValidateDeployScheduleInRange(ds, from, to); len(fieldErrs) > 0 {
		return report(stderr, o.file, fieldErrs.ToAggregate().Errors())
	}
	compiled, err := schedule.Compile(ds)
	if err != nil {
		return fmt.Errorf("compiling %s: %w", o.file, err)
	}
	tl, err := compiled.Evaluate(from, to)
	if err != nil {
		return fmt.Errorf("evaluating %s: %w", o.file, err)
	}
	// Build the whole output first: on any failure nothing reaches stdout.
	var out bytes.Buffer
	if o.output == outputJSON {
		err = timelineprint.WriteJSON(&out, tl, compiled.Location())
	} else {
		err = timelineprint.WriteTable(&out, ds, tl, compiled.Location(), from, to)
	}
	if err != nil {
		return fmt.Errorf("formatting the timeline: %w", err)
	}
	_, err = out.WriteTo(stdout)
	return err
}

func (o *timelineOptions) parseFlags() (from, to time.Time, errs []error) {
	parse := func(name, value string) time.Time {
		t, err := time.Parse(time.RFC3339, value)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: Invalid value: %q: not an RFC 3339 time such as 2026-10-19T00:00:00+07:00", name, value))
		}
		return t
	}
	from, to = parse("from", o.from), parse("to", o.to)
	if len(errs) == 0 && !from.Before(to) {
		errs = append(errs, fmt.Errorf("--to: Invalid value: %q: must be after --from %q", o.to, o.from))
	}
	if o.output != outputTable && o.output != outputJSON {
		errs = append(errs, fmt.Errorf("--output: Unsupported value: %q: supported values: %q, %q", o.output, outputTable, outputJSON))
	}
	return from, to, errs
}

// report writes each error on its own line of stderr and returns one error that
// says how many there were.
func report(stderr io.Writer, what string, errs []error) error {
	for _, err := range errs {
		fmt.Fprintln(stderr, err)
	}
	return fmt.Errorf("%s: %d error(s): %w", what, len(errs), errReported)
}
