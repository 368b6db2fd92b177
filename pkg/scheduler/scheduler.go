// Package scheduler wires Rota's out-of-tree plugins into kube-scheduler. The
// rota-scheduler binary and the integration tests both build the scheduler from
// PluginOptions and the KubeSchedulerConfiguration in manifests/scheduler, so the
// tests exercise exactly what is shipped.
package scheduler

import (
	"sort"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/pkg/plugins/fairness"
	"github.com/rota-dev/rota/pkg/plugins/gang"
	"github.com/rota-dev/rota/pkg/plugins/quota"
	"github.com/rota-dev/rota/pkg/plugins/reclaim"
	"github.com/rota-dev/rota/pkg/plugins/reservation"
	"github.com/rota-dev/rota/pkg/plugins/tiering"
	"github.com/rota-dev/rota/pkg/plugins/waitreason"
	"github.com/rota-dev/rota/pkg/waits"
)

// ProfileName is the schedulerName a pod sets to be placed by Rota.
const ProfileName = "rota-scheduler"

// Plugins returns the factories of every Rota plugin, by name. The plugins
// built from one call share one gpupool.Caches: the slice index, compiled
// selectors and selector results are kept once per scheduler, whichever
// plugin needs them first in a cycle; and one waits.Causes, which
// WaitReason keeps and Fairness reads. Compiled with the allocator's CEL
// features, so Tiering's predictions and the other plugins' counts agree.
func Plugins() frameworkruntime.Registry {
	return PluginsWithAdviceClock(nil)
}

// PluginsWithAdviceClock is Plugins whose WaitReason plugin reads "now"
// for the unblock advice (the DeploySchedule transitions still to come)
// from clk: the sandbox passes its virtual clock. nil is the real clock.
func PluginsWithAdviceClock(clk clock.PassiveClock) frameworkruntime.Registry {
	return registry(clk, nil)
}

// registry is PluginsWithAdviceClock whose Reservation plugin reads Rota's
// custom resources through dyn; nil makes it a client from the scheduler's
// kubeconfig, as kube-scheduler runs it. The unit test that runs the real
// scheduler against fake clientsets (no API server, no kubeconfig) passes
// a fake dynamic client.
func registry(clk clock.PassiveClock, dyn dynamic.Interface) frameworkruntime.Registry {
	caches := gpupool.NewCaches(tiering.CELFeatures())
	causes := waits.NewCauses()
	live := gpuquota.NewLive()
	return frameworkruntime.Registry{
		tiering.Name:     tiering.Factory(caches),
		reservation.Name: reservation.Factory(dyn),
		quota.Name:       quota.Factory(caches, live, dyn),
		fairness.Name:    fairness.Factory(caches, causes),
		gang.Name:        gang.Factory(caches),
		reclaim.Name:     reclaim.Factory(caches, live),
		waitreason.Name:  waitreason.FactoryWithAdviceClock(caches, causes, clk),
	}
}

// PluginOptions registers every Rota plugin with kube-scheduler's out-of-tree
// registry. A plugin runs only where the KubeSchedulerConfiguration enables it.
func PluginOptions() []app.Option {
	return PluginOptionsWithAdviceClock(nil)
}

// PluginOptionsWithAdviceClock is PluginOptions with PluginsWithAdviceClock.
func PluginOptionsWithAdviceClock(clk clock.PassiveClock) []app.Option {
	plugins := PluginsWithAdviceClock(clk)
	names := make([]string, 0, len(plugins))
	for name := range plugins {
		names = append(names, name)
	}
	sort.Strings(names)
	opts := make([]app.Option, 0, len(names))
	for _, name := range names {
		opts = append(opts, app.WithPlugin(name, plugins[name]))
	}
	return opts
}

// NewCommand returns kube-scheduler's command with Rota's plugins registered.
func NewCommand() *cobra.Command {
	cmd := app.NewSchedulerCommand(PluginOptions()...)
	cmd.Use = "rota-scheduler"
	cmd.Short = "kube-scheduler with Rota's GPU placement plugins"
	return cmd
}
