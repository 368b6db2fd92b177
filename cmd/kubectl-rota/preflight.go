package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/rota-dev/rota/pkg/preflight"
)

// errChecksFailed makes the command exit 1 after printing the checks.
var errChecksFailed = errors.New("preflight: some checks failed; each says what to do")

func newPreflightCommand(o *options) *cobra.Command {
	p := preflight.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check that the cluster can run Rota (APIs, DRA, CDI) and, after an install, that Rota runs (CRDs, controllers, driver)",
		Long: `preflight runs each check against the API server and prints it as OK, FAIL
or UNKNOWN with what to do. It exits 1 when a check fails. Before an install
the checks of Rota's own objects fail; run it again after installing
(docs/install.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			client, _, _, err := o.clients()
			if err != nil {
				return err
			}
			rs := preflight.Run(cmd.Context(), client, p)
			switch o.output {
			case "json":
				err = writeJSON(o.streams.Out, rs)
			case "yaml":
				err = writeYAML(o.streams.Out, rs)
			default:
				err = preflight.Print(o.streams.Out, rs)
			}
			if err != nil {
				return err
			}
			if preflight.Failed(rs) {
				return errChecksFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&p.Namespace, "rota-namespace", p.Namespace, "namespace Rota is installed in")
	cmd.Flags().StringVar(&p.GPUNodeSelector, "gpu-node-selector", p.GPUNodeSelector, "label selector of the GPU nodes (the driver DaemonSet's nodeSelector)")
	return cmd
}
