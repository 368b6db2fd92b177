package main

import (
	"bytes"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/forecast"
)

// forecastFlags are the forecast command's own flags.
type forecastFlags struct {
	from, to, zone string
	now            func() time.Time
}

func newForecastCommand(o *options) *cobra.Command {
	f := &forecastFlags{now: time.Now}
	cmd := &cobra.Command{
		Use:   "forecast [--from RFC3339] [--to RFC3339] [-o table|json|html]",
		Short: "Every DeploySchedule's GPU demand over the next days against the pool, and where it over-commits",
		Long: `forecast reads every DeploySchedule of the cluster, the workloads its targets
name (replicas, ResourceClaimTemplates), GPUReservations, the pods no schedule
touches, and the pool from the ResourceSlices (healthy, unreserved GPUs, by
model), and sets over [--from, --to) (default: the next 7 days) the demand per
model against the pool: each transition's peak while its steps run, every
window where demand exceeds the pool by count or because pods do not pack
onto nodes (fragmentation), naming the targets that collide, and the stops the
alias guard and the starts the namespace quota will refuse.

-o json prints one JSON object per line (docs/schedule.md, "Capacity
forecast"); -o html a self-contained page.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, o)
		},
	}
	cmd.Flags().StringVar(&f.from, "from", "", "start of the range, RFC 3339 (default: now)")
	cmd.Flags().StringVar(&f.to, "to", "", "end of the range, RFC 3339 (default: 7 days after --from)")
	cmd.Flags().StringVar(&f.zone, "time-zone", "", "IANA zone to print times in (default: the first schedule's)")
	return cmd
}

func (f *forecastFlags) run(cmd *cobra.Command, o *options) error {
	switch o.output {
	case "", "table", "json", "html":
	default:
		return fmt.Errorf("--output %q is not supported by forecast: use table, json or html", o.output)
	}
	from, to, err := f.rangeOf()
	if err != nil {
		return err
	}
	client, dyn, _, err := o.clients()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	objs, skipped, err := forecast.ReadCluster(ctx, client, dyn, forecast.Sources{})
	if err != nil {
		return err
	}
	for _, s := range skipped {
		fmt.Fprintln(o.streams.ErrOut, "left out:", s)
	}
	in, err := forecast.Build(objs, from, to)
	if err != nil {
		return err
	}
	res, err := forecast.Run(ctx, in)
	if err != nil {
		return err
	}
	loc := time.UTC
	switch {
	case f.zone != "":
		if loc, err = schedule.LoadLocation(f.zone); err != nil {
			return fmt.Errorf("--time-zone: %w", err)
		}
	case len(in.Schedules) > 0:
		loc = in.Schedules[0].Compiled.Location()
	}
	var out bytes.Buffer
	switch o.output {
	case "json":
		err = forecast.WriteJSON(&out, res, loc)
	case "html":
		err = forecast.WriteHTML(&out, res, loc, "Rota capacity forecast")
	default:
		err = forecast.WriteTable(&out, res, loc)
	}
	if err != nil {
		return fmt.Errorf("formatting the forecast: %w", err)
	}
	_, err = out.WriteTo(o.streams.Out)
	return err
}

func (f *forecastFlags) rangeOf() (from, to time.Time, err error) {
	from = f.now().Truncate(time.Minute)
	if f.from != "" {
		if from, err = time.Parse(time.RFC3339, f.from); err != nil {
			return from, to, fmt.Errorf("--from %q is not an RFC 3339 time such as 2026-10-19T00:00:00+07:00", f.from)
		}
	}
	to = from.Add(7 * 24 * time.Hour)
	if f.to != "" {
		if to, err = time.Parse(time.RFC3339, f.to); err != nil {
			return from, to, fmt.Errorf("--to %q is not an RFC 3339 time such as 2026-10-26T00:00:00+07:00", f.to)
		}
	}
	if !from.Before(to) {
		return from, to, fmt.Errorf("--to %s must be after --from %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	return from, to, nil
}
