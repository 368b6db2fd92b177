package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"

	rotascheduler "github.com/rota-dev/rota/pkg/scheduler"
)

// SchedulerConfig writes the shipped manifests/scheduler/config.yaml with the
// two settings a test must change: the kubeconfig of this control plane and no
// leader election. It returns the path of the written file.
func (cp *ControlPlane) SchedulerConfig(tb testing.TB) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(RepoRoot(tb), "manifests", "scheduler", "config.yaml"))
	if err != nil {
		tb.Fatalf("read scheduler config: %v", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		tb.Fatalf("decode scheduler config: %v", err)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = cp.Kubeconfig
	cfg["clientConnection"] = conn
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		tb.Fatalf("encode scheduler config: %v", err)
	}
	path := filepath.Join(tb.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		tb.Fatalf("write scheduler config: %v", err)
	}
	return path
}

// StartScheduler runs Rota's scheduler in-process through kube-scheduler's own
// app.Setup, with Rota's plugin registry and the shipped configuration. It
// stops before the control plane does.
func (cp *ControlPlane) StartScheduler(tb testing.TB) {
	tb.Helper()
	cp.startSchedulerFrom(tb, cp.SchedulerConfig(tb))
}

// startSchedulerFrom runs the scheduler from the KubeSchedulerConfiguration
// file at configFile.
func (cp *ControlPlane) startSchedulerFrom(tb testing.TB, configFile string) {
	tb.Helper()
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))

	opts := options.NewOptions()
	opts.ConfigFile = configFile
	opts.SecureServing.BindPort = 0 // no health/metrics endpoint in tests
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		cancel()
		tb.Fatalf("scheduler feature gates: %v", err)
	}
	cc, sched, err := app.Setup(ctx, opts, rotascheduler.PluginOptions()...)
	if err != nil {
		cancel()
		tb.Fatalf("set up scheduler: %v", err)
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
		tb.Fatalf("scheduler handlers not synced: %v", err)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		cc.EventBroadcaster.Shutdown()
		cc.InformerFactory.Shutdown()
	})
}
