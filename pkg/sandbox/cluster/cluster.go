package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/events"
	"github.com/rota-dev/rota/pkg/quotastatus"
	reservationcontroller "github.com/rota-dev/rota/pkg/reservation/controller"
	"github.com/rota-dev/rota/pkg/sandbox/apply"
	"github.com/rota-dev/rota/pkg/sandbox/controlplane"
	schedulecontroller "github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/pkg/statemetrics"
)

// GateNamespace holds the schedule controller's gate ConfigMap, switched on.
const GateNamespace = "rota-system"

// Cluster is a running sandbox.
type Cluster struct {
	*controlplane.ControlPlane
	Nodes   []*Node
	Applier *apply.Applier
	Watch   *Watch
	// Registry is what schedule-controller serves on /metrics: the
	// DeploySchedule and GPUReservation controllers' metrics and the state
	// gauges (pkg/statemetrics). The scheduler's are in component-base's
	// legacy registry, each node's driver's in its Plugin.Metrics.
	Registry metrics.KubeRegistry
	// SchedulerConfig is the path of the scheduler's configuration file.
	SchedulerConfig string

	opts Options
	stop []func()
	// schedulerInFlight counts the pods the scheduler is working on.
	schedulerInFlight func() int
}

// Start brings the whole sandbox up. Stop tears it down.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(o.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("sandbox directory: %w", err)
	}
	cp, err := controlplane.Start(ctx, logger, o.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{ControlPlane: cp, opts: o, Registry: metrics.NewKubeRegistry()}
	c.stop = append(c.stop, cp.Stop)
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	manifests := filepath.Join(o.RepoRoot, "manifests")
	if err := cp.InstallCRDs(ctx, filepath.Join(manifests, "crds")); err != nil {
		return nil, err
	}
	if c.Applier, err = apply.NewApplier(cp.Config); err != nil {
		return nil, err
	}
	if err := c.Applier.ApplyFile(ctx, filepath.Join(manifests, "driver", "deviceclass.yaml")); err != nil {
		return nil, err
	}
	if err := c.Applier.ApplyYAML(ctx, []byte(gateYAML)); err != nil {
		return nil, err
	}
	schedConfig := filepath.Join(o.Dir, "scheduler-config.yaml")
	if err := writeSchedulerConfig(filepath.Join(manifests, "scheduler", "config.yaml"), cp.Kubeconfig, schedConfig, o.SchedulerPluginArgs); err != nil {
		return nil, err
	}
	c.SchedulerConfig = schedConfig
	if err := c.run(ctx, "ResourceClaim controller", func(ctx context.Context) (func(), error) {
		return controlplane.StartClaimController(ctx, cp.Client)
	}); err != nil {
		return nil, err
	}
	if err := c.run(ctx, "workload controllers", c.startWorkloadControllers); err != nil {
		return nil, err
	}
	if !o.ExternalComponents {
		if err := c.run(ctx, "scheduler", func(ctx context.Context) (stop func(), err error) {
			stop, c.schedulerInFlight, err = controlplane.StartSchedulerWithAdviceClock(ctx, schedConfig, c.opts.Clock)
			return stop, err
		}); err != nil {
			return nil, err
		}
		if err := c.run(ctx, "schedule and reservation controllers", c.startRotaControllers); err != nil {
			return nil, err
		}
	}
	for _, spec := range o.Nodes {
		n, err := c.startNode(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", spec.Name, err)
		}
		c.Nodes = append(c.Nodes, n)
		c.stop = append(c.stop, n.stop)
	}
	if c.Watch, err = startWatch(ctx, c); err != nil {
		return nil, err
	}
	c.stop = append(c.stop, c.Watch.stop)
	return c, nil
}

// Stop ends every component, the control plane last.
func (c *Cluster) Stop() {
	for i := len(c.stop) - 1; i >= 0; i-- {
		c.stop[i]()
	}
	c.stop = nil
}

// Node returns the named simulated node, nil if there is none.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (c *Cluster) run(ctx context.Context, what string, start func(ctx context.Context) (func(), error)) error {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName(what))
	stop, err := start(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c.stop = append(c.stop, stop)
	return nil
}

// gateYAML switches the schedule controller on.
const gateYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: ` + GateNamespace + `
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + schedulecontroller.DefaultGateName + `
  namespace: ` + GateNamespace + `
data:
  ` + schedulecontroller.GateKey + `: "on"
`

// writeSchedulerConfig is controlplane.WriteSchedulerConfig with the
// scheduler's retry back-off at its minimum (1s) — the simulation advances
// its clock once the cluster is quiet, and a pod waiting out a 10s back-off
// would be placed late in simulated time — and the plugin args of
// pluginArgs in place of the profile's.
func writeSchedulerConfig(src, kubeconfig, dst string, pluginArgs map[string]any) error {
	if err := controlplane.WriteSchedulerConfig(src, kubeconfig, dst); err != nil {
		return err
	}
	data, err := os.ReadFile(dst)
	if err != nil {
		return fmt.Errorf("read scheduler config: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("decode scheduler config: %w", err)
	}
	cfg["podInitialBackoffSeconds"] = 1
	cfg["podMaxBackoffSeconds"] = 1
	if err := replacePluginArgs(cfg, pluginArgs); err != nil {
		return err
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode scheduler config: %w", err)
	}
	return os.WriteFile(dst, out, 0o600)
}

// startWorkloadControllers runs kube-controller-manager's Deployment and
// ReplicaSet controllers.
func (c *Cluster) startWorkloadControllers(ctx context.Context) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	dc, err := deployment.NewDeploymentController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c.Client)
	if err != nil {
		cancel()
		return nil, err
	}
	rsc := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c.Client, replicaset.BurstReplicas)
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { dc.Run(ctx, 2) })
	wg.Go(func() { rsc.Run(ctx, 2) })
	return func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}, nil
}

// startRotaControllers runs Rota's DeploySchedule, GPUReservation and
// GPUQuota status controllers on the sandbox clock, as schedule-controller
// does: one event broadcaster for all.
func (c *Cluster) startRotaControllers(ctx context.Context) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	recorder, stopEvents, err := events.NewRecorder(ctx, c.Client, events.ControllerComponent)
	if err != nil {
		cancel()
		return nil, err
	}
	fail := func(err error) (func(), error) {
		cancel()
		stopEvents()
		return nil, err
	}
	// The sandbox owns the controllers' informer factories, as the binary
	// does: the constructors take their informers, the factories start after.
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, 0)
	gateFactory := schedulecontroller.NewGateInformerFactory(c.Client, GateNamespace, schedulecontroller.DefaultGateName)
	schedules, err := schedulecontroller.New(schedulecontroller.Options{
		Client: c.Client, Dynamic: c.Dynamic, Clock: c.opts.Clock,
		Recorder:       recorder,
		DynFactory:     dynFactory,
		GateNamespace:  GateNamespace,
		GateFactory:    gateFactory,
		PassPeriod:     c.opts.PassPeriod,
		ProgressPeriod: c.opts.ProgressPeriod,
		Registry:       c.Registry,
	})
	if err != nil {
		return fail(err)
	}
	reservations, err := reservationcontroller.New(reservationcontroller.Options{
		Client: c.Client, Dynamic: c.Dynamic, Clock: c.opts.Clock, Recorder: recorder,
		Informers: reservationcontroller.NewInformers(factory, dynFactory),
		Registry:  c.Registry,
	})
	if err != nil {
		return fail(err)
	}
	quotas, err := quotastatus.New(quotastatus.Options{
		Dynamic: c.Dynamic, Clock: c.opts.Clock,
		Informers: quotastatus.NewInformers(factory, dynFactory),
	})
	if err != nil {
		return fail(err)
	}
	if err := c.Registry.CustomRegister(statemetrics.New(statemetrics.ListersFrom(factory, dynFactory))); err != nil {
		return fail(fmt.Errorf("registering the state metrics: %w", err))
	}
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	gateFactory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { schedules.Run(ctx, 2) })
	wg.Go(func() { reservations.Run(ctx, 2) })
	wg.Go(func() { quotas.Run(ctx, 1) })
	return func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		dynFactory.Shutdown()
		gateFactory.Shutdown()
		stopEvents()
	}, nil
}

// replacePluginArgs sets the args of every plugin named in args in the
// configuration's profiles. A plugin without a pluginConfig entry in any
// profile is an error: its args would go unused.
func replacePluginArgs(cfg map[string]any, args map[string]any) error {
	found := map[string]bool{}
	var known []string
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		profile, _ := p.(map[string]any)
		entries, _ := profile["pluginConfig"].([]any)
		for _, e := range entries {
			entry, _ := e.(map[string]any)
			name, _ := entry["name"].(string)
			known = append(known, name)
			if a, ok := args[name]; ok {
				entry["args"] = a
				found[name] = true
			}
		}
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if !found[name] {
			errs = append(errs, fmt.Errorf("schedulerPluginArgs.%s: Unsupported value: the scheduler profile configures only %v", name, known))
		}
	}
	return errors.Join(errs...)
}
