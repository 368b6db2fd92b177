package main

import (
	"fmt"

	"github.com/spf13/cobra"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/poolreport"
)

func newPoolCommand(o *options) *cobra.Command {
	var driver string
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Every node's GPUs: model, UUID, health, reservation, holder pod and tenant, VRAM of shared GPUs; then GPUs reserved and charged per tenant, and each tenant's GPUQuota guarantee, use, borrowing and lending",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			client, dyn, _, err := o.clients()
			if err != nil {
				return err
			}
			rows, err := poolreport.List(cmd.Context(), client, dyn, driver)
			if err != nil {
				return err
			}
			switch o.output {
			case "json":
				return writeJSON(o.streams.Out, rows)
			case "yaml":
				return writeYAML(o.streams.Out, rows)
			}
			if err := poolreport.WriteTable(o.streams.Out, rows); err != nil {
				return err
			}
			// Per tenant and model: GPUs its reservations hold, and GPUs
			// charged to it as the usage counters charge them.
			fmt.Fprintln(o.streams.Out)
			if err := poolreport.WriteTenants(o.streams.Out, poolreport.Tenants(rows)); err != nil {
				return err
			}
			// Per tenant and model of its GPUQuota: guaranteed, used,
			// borrowed, lent, and per model whether the guarantees fit.
			// Left out where there are none, or they cannot be read (a
			// tenant may not: docs/security.md).
			quotas, err := poolreport.ListGPUQuotas(cmd.Context(), dyn)
			if err != nil || len(quotas) == 0 {
				return nil //nolint:nilerr // the section is optional
			}
			fmt.Fprintln(o.streams.Out)
			return poolreport.WriteGuarantees(o.streams.Out, poolreport.GuaranteesOf(quotas, rows))
		},
	}
	cmd.Flags().StringVar(&driver, "driver", gpuv1.DriverName, "DRA driver whose devices are listed")
	return cmd
}
