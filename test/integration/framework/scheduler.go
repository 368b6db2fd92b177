package framework

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rota-dev/rota/pkg/sandbox/controlplane"
)

// SchedulerConfig writes the shipped manifests/scheduler/config.yaml with the
// two settings a test must change: the kubeconfig of this control plane and no
// leader election. It returns the path of the written file.
func (cp *ControlPlane) SchedulerConfig(tb testing.TB) string {
	tb.Helper()
	return cp.schedulerConfigFrom(tb, filepath.Join(RepoRoot(tb), "manifests", "scheduler", "config.yaml"))
}

// schedulerConfigFrom writes the KubeSchedulerConfiguration file src with
// this control plane's kubeconfig and no leader election, and returns the
// path of the written file.
func (cp *ControlPlane) schedulerConfigFrom(tb testing.TB, src string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "scheduler-config.yaml")
	if err := controlplane.WriteSchedulerConfig(src, cp.Kubeconfig, path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// StartSchedulerWithConfig is StartScheduler with another
// KubeSchedulerConfiguration file (e.g. one the Helm chart rendered): its
// profiles and plugin args as they are, only the kubeconfig and leader
// election replaced.
func (cp *ControlPlane) StartSchedulerWithConfig(tb testing.TB, src string) {
	tb.Helper()
	cp.startSchedulerFrom(tb, cp.schedulerConfigFrom(tb, src))
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
	stop, err := controlplane.StartScheduler(klog.NewContext(context.Background(), logger), configFile)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
}
