package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/forecast"
)

const outputHTML = "html"

type forecastOptions struct {
	files, nodes           []string
	from, to, output, zone string
	clock                  clock.PassiveClock
}

func newForecastCommand() *cobra.Command {
	o := &forecastOptions{output: outputTable, clock: clock.RealClock{}}
	cmd := &cobra.Command{
		Use:   "forecast --file FILE... --node NAME=PROFILE... [--from RFC3339] [--to RFC3339] [--output table|json|html]",
		Short: "Forecast schedules' GPU demand against a pool, without a cluster",
		Long: `forecast evaluates the DeploySchedules in the files over [--from, --to) (default:
the next 7 days) and sets what their targets ask of the GPU pool against what
the pool holds, per GPU model: demand over time, each transition's peak while
its steps run in order (release-first unless the schedule says AcquireFirst),
and every window where demand exceeds the pool, naming the targets that
collide. A window that fits by count is also packed node by node with the
capacity preview's DRA allocator: pods that need more GPUs on one node than
any node has free are reported as fragmentation.

The files hold YAML documents: DeploySchedules, the Deployments and
StatefulSets they name (replicas and pod template), the ResourceClaimTemplates
those pods use, GPUReservations (their GPUs leave the pool, their members are
left out), Services and ResourceQuotas (to warn of stops the alias guard will
refuse and starts the namespace quota will), and optionally DeviceClasses
(default: ` + gpuv1.DeviceClassName + `). A Deployment
or StatefulSet no schedule names runs the whole range. The pool is one
--node NAME=PROFILE per node, with the driver's mock profiles (dgx-h100,
hgx-h200, or a list such as h100:8 or h100:4,a100:4).

--output json prints one JSON object per line: "capacity" records (per model,
every stretch where demand changes), "transition" records, "overcommit"
records and "warning" records (AliasBlocked, QuotaRefused) (docs/schedule.md,
"Capacity forecast"). --output html prints a
self-contained page. The exit status is 0 whether or not the pool is
over-committed; scripts read the overcommit records.`,
		Example: `  schedule-controller forecast --file examples/forecast-week.yaml --node gpu-node-0=h100:10 \
    --from 2026-10-19T00:00:00+07:00 --to 2026-10-26T00:00:00+07:00`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	flags := cmd.Flags()
	flags.StringArrayVarP(&o.files, "file", "f", nil, "YAML file of schedules, workloads, claim templates, reservations (repeatable; required)")
	flags.StringArrayVar(&o.nodes, "node", nil, "a node of the pool as NAME=PROFILE, e.g. gpu-node-0=h100:10 (repeatable; required)")
	flags.StringVar(&o.from, "from", "", "start of the range, RFC 3339 (default: now)")
	flags.StringVar(&o.to, "to", "", "end of the range, RFC 3339 (default: 7 days after --from)")
	flags.StringVar(&o.zone, "time-zone", "", "IANA zone to print times in (default: the first schedule's)")
	flags.StringVarP(&o.output, "output", "o", o.output, "output format: table, json or html")
	for _, name := range []string{"file", "node"} {
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic(err) // a flag defined just above; only a typo gets here
		}
	}
	return cmd
}

func (o *forecastOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	from, to, errs := o.parseRange()
	var objs forecast.Objects
	slices, nodeErrs := poolSlices(o.nodes)
	errs = append(errs, nodeErrs...)
	if len(errs) > 0 {
		return report(stderr, "invalid flags", errs)
	}
	if errs := readObjects(o.files, &objs); len(errs) > 0 {
		return report(stderr, "invalid input", errs)
	}
	objs.Slices = slices
	if len(objs.Classes) == 0 {
		objs.Classes = append(objs.Classes, defaultClass())
	}
	in, err := forecast.Build(objs, from, to)
	if err != nil {
		return err
	}
	loc, err := o.location(in)
	if err != nil {
		return report(stderr, "invalid flags", []error{err})
	}
	f, err := forecast.Run(ctx, in)
	if err != nil {
		return fmt.Errorf("forecasting: %w", err)
	}
	var out bytes.Buffer
	switch o.output {
	case outputJSON:
		err = forecast.WriteJSON(&out, f, loc)
	case outputHTML:
		err = forecast.WriteHTML(&out, f, loc, "Rota capacity forecast")
	default:
		err = forecast.WriteTable(&out, f, loc)
	}
	if err != nil {
		return fmt.Errorf("formatting the forecast: %w", err)
	}
	_, err = out.WriteTo(stdout)
	return err
}

func (o *forecastOptions) parseRange() (from, to time.Time, errs []error) {
	parse := func(name, value string, def time.Time) time.Time {
		if value == "" {
			return def
		}
		t, err := time.Parse(time.RFC3339, value)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: Invalid value: %q: not an RFC 3339 time such as 2026-10-19T00:00:00+07:00", name, value))
		}
		return t
	}
	from = parse("from", o.from, o.clock.Now().Truncate(time.Minute))
	to = parse("to", o.to, from.Add(7*24*time.Hour))
	if len(errs) == 0 && !from.Before(to) {
		errs = append(errs, fmt.Errorf("--to: Invalid value: %q: must be after --from %q", o.to, o.from))
	}
	if o.output != outputTable && o.output != outputJSON && o.output != outputHTML {
		errs = append(errs, fmt.Errorf("--output: Unsupported value: %q: supported values: %q, %q, %q", o.output, outputTable, outputJSON, outputHTML))
	}
	return from, to, errs
}

// location is --time-zone, else the first schedule's zone, else UTC.
func (o *forecastOptions) location(in forecast.Input) (*time.Location, error) {
	if o.zone != "" {
		loc, err := schedule.LoadLocation(o.zone)
		if err != nil {
			return nil, fmt.Errorf("--time-zone: Invalid value: %q: %w", o.zone, err)
		}
		return loc, nil
	}
	if len(in.Schedules) > 0 {
		return in.Schedules[0].Compiled.Location(), nil
	}
	return time.UTC, nil
}
