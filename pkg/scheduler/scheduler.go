// Package scheduler wires Rota's out-of-tree plugins into kube-scheduler. The
// rota-scheduler binary and the integration tests both build the scheduler from
// PluginOptions and the KubeSchedulerConfiguration in manifests/scheduler, so the
// tests exercise exactly what is shipped.
package scheduler

import (
	"github.com/spf13/cobra"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/rota-dev/rota/pkg/plugins/fairness"
	"github.com/rota-dev/rota/pkg/plugins/gang"
	"github.com/rota-dev/rota/pkg/plugins/quota"
	"github.com/rota-dev/rota/pkg/plugins/reservation"
	"github.com/rota-dev/rota/pkg/plugins/tiering"
	"github.com/rota-dev/rota/pkg/plugins/waitreason"
)

// ProfileName is the schedulerName a pod sets to be placed by Rota.
const ProfileName = "rota-scheduler"

// PluginOptions registers every Rota plugin with kube-scheduler's out-of-tree
// registry. A plugin runs only where the KubeSchedulerConfiguration enables it.
func PluginOptions() []app.Option {
	return []app.Option{
		app.WithPlugin(tiering.Name, tiering.New),
		app.WithPlugin(reservation.Name, reservation.New),
		app.WithPlugin(quota.Name, quota.New),
		app.WithPlugin(fairness.Name, fairness.New),
		app.WithPlugin(gang.Name, gang.New),
		app.WithPlugin(waitreason.Name, waitreason.New),
	}
}

// NewCommand returns kube-scheduler's command with Rota's plugins registered.
func NewCommand() *cobra.Command {
	cmd := app.NewSchedulerCommand(PluginOptions()...)
	cmd.Use = "rota-scheduler"
	cmd.Short = "kube-scheduler with Rota's GPU placement plugins"
	return cmd
}
