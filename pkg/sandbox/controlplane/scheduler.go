package controlplane

import (
	"context"
	"fmt"
	"os"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	rotascheduler "github.com/rota-dev/rota/pkg/scheduler"
)

// WriteSchedulerConfig copies the KubeSchedulerConfiguration at src
// (manifests/scheduler/config.yaml) to dst with the two settings an
// in-process scheduler must change: the kubeconfig and no leader election.
func WriteSchedulerConfig(src, kubeconfig, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read scheduler config: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("decode scheduler config %s: %w", src, err)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode scheduler config: %w", err)
	}
	if err := os.WriteFile(dst, out, 0o600); err != nil {
		return fmt.Errorf("write scheduler config: %w", err)
	}
	return nil
}

// StartScheduler runs Rota's scheduler in-process through kube-scheduler's
// own app.Setup, with Rota's plugin registry and the configuration file
// configFile. The returned function stops it.
func StartScheduler(ctx context.Context, configFile string) (func(), error) {
	stop, _, err := StartSchedulerWithInFlight(ctx, configFile)
	return stop, err
}

// StartSchedulerWithInFlight is StartScheduler that also returns how many
// pods the scheduler has taken from its queue and not finished with (in a
// scheduling cycle, or binding, or waiting at Permit): a pod in flight is
// in no queue, so the queue metrics alone do not show the work.
func StartSchedulerWithInFlight(ctx context.Context, configFile string) (stop func(), inFlight func() int, err error) {
	return StartSchedulerWithAdviceClock(ctx, configFile, nil)
}

// StartSchedulerWithAdviceClock is StartSchedulerWithInFlight whose unblock
// advice reads "now" from clk (the sandbox's virtual clock; nil: real).
func StartSchedulerWithAdviceClock(ctx context.Context, configFile string, clk clock.PassiveClock) (stop func(), inFlight func() int, err error) {
	stop, sched, err := startScheduler(ctx, configFile, clk)
	if err != nil {
		return nil, nil, err
	}
	return stop, func() int { return len(sched.SchedulingQueue.InFlightPods()) }, nil
}

func startScheduler(ctx context.Context, configFile string, clk clock.PassiveClock) (func(), *scheduler.Scheduler, error) {
	ctx, cancel := context.WithCancel(ctx)
	opts := options.NewOptions()
	opts.ConfigFile = configFile
	opts.SecureServing.BindPort = 0 // no health/metrics endpoint
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("scheduler feature gates: %w", err)
	}
	cc, sched, err := app.Setup(ctx, opts, rotascheduler.PluginOptionsWithAdviceClock(clk)...)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("set up scheduler: %w", err)
	}

	cc.EventBroadcaster.StartRecordingToSink(ctx.Done())
	cc.InformerFactory.Start(ctx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.Start(ctx.Done())
	}
	cc.InformerFactory.WaitForCacheSync(ctx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.WaitForCacheSync(ctx.Done())
	}
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("scheduler handlers not synced: %w", err)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
		cc.EventBroadcaster.Shutdown()
		cc.InformerFactory.Shutdown()
	}, sched, nil
}
