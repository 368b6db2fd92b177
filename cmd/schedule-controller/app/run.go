package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/events"
	schedulecontroller "github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/pkg/schedule/targetguard"
)

// runOptions are the flags of `run`.
type runOptions struct {
	kubeconfig    string
	namespace     string
	identity      string
	leaderElect   bool
	leaseName     string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	endpoints     EndpointOptions
	webhook       WebhookOptions
	kubeAPIQPS    float64
	kubeAPIBurst  int
	settings      settings
}

func newRunCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the controllers against a cluster, with leader election",
		Long: `run starts Rota's controllers (DeploySchedule and GPUReservation) against the cluster of
--kubeconfig, or the in-cluster configuration. Several replicas may run; one
holds the Lease --lease-name in --namespace and does the work. Correctness does
not depend on the lease: every workload change is guarded by status
compare-and-swap and an idempotency key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return o.run(ctx)
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration")
	// Sized for 1,000 nodes: a pass over every schedule, the reservations'
	// holds and a week-swap's workload writes; client-go's 5/10 would make a
	// release-first swap of many targets wait on the client.
	f.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 50, "steady requests per second to the API server")
	f.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "requests that may be sent at once above --kube-api-qps")
	f.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "rota-system"), "the controller's namespace: its Lease and the gate ConfigMap live here")
	f.StringVar(&o.identity, "identity", host, "this replica's name in the Lease")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "hold a Lease before working, so that one replica of several works")
	f.StringVar(&o.leaseName, "lease-name", "rota-schedule-controller", "name of the Lease")
	f.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "Lease duration")
	f.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up")
	f.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "how often candidates retry")
	f.StringVar(&o.endpoints.MetricsAddress, "metrics-bind-address", "127.0.0.1:8080",
		"address of /metrics, whose labels name tenants' namespaces and schedules: the pod's loopback by default (scrape it through an authenticating proxy); "+
			"a wider address only with --metrics-secure or where a NetworkPolicy limits who reaches it. Empty disables")
	f.BoolVar(&o.endpoints.MetricsSecure, "metrics-secure", false,
		"serve /metrics over TLS (a self-signed certificate) to callers whose bearer token the API server accepts (TokenReview) and who may get /metrics (SubjectAccessReview); "+
			"the ServiceAccount needs system:auth-delegator")
	f.StringVar(&o.endpoints.HealthAddress, "health-probe-bind-address", ":8081", "address of /healthz and /readyz for the kubelet's probes (they answer ok, nothing more); empty disables")
	f.StringVar(&o.webhook.Address, "webhook-bind-address", "",
		"address of the target webhook (HTTPS, path "+targetguard.Path+"), which the API server asks before it admits this controller's workload and claim-template writes; empty disables")
	f.StringVar(&o.webhook.CertDir, "webhook-cert-dir", "/etc/rota/webhook", "directory with tls.crt and tls.key of the target webhook (the Secret webhook-certs writes); read again when they change")
	f.StringVar(&o.settings.GateName, "gate-configmap", schedulecontroller.DefaultGateName, "ConfigMap (in --namespace) whose key 'mode' is off, observe or on")
	f.DurationVar(&o.settings.PassPeriod, "pass-period", schedulecontroller.DefaultPassPeriod, "how often every schedule is re-checked")
	f.DurationVar(&o.settings.ProgressPeriod, "progress-period", schedulecontroller.DefaultProgressPeriod, "how often a schedule with a step in flight is looked at")
	f.DurationVar(&o.settings.ForecastPeriod, "forecast-period", schedulecontroller.DefaultForecastPeriod,
		"how long the capacity forecast behind each schedule's Forecast condition is reused (a schedule change forgets it at once); negative turns the condition off")
	f.IntVar(&o.settings.Workers, "workers", 4, "parallel reconciles per controller")
	f.StringVar(&o.settings.BudgetWebhookURL, "budget-webhook-url", "", "URL the preflight of every transition posts what it would start to (JSON BudgetRequest, answer BudgetDecision); a refusal or an error fails the transition with BudgetRefused before anything is released. Empty (default): no budget check")
	f.DurationVar(&o.settings.BudgetWebhookTimeout, "budget-webhook-timeout", 10*time.Second, "how long one budget webhook call may take")
	return cmd
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (o *runOptions) run(ctx context.Context) error {
	client, dyn, err := o.clients()
	if err != nil {
		return err
	}
	recorder, stopEvents, err := events.NewRecorder(ctx, client, events.ControllerComponent)
	if err != nil {
		return err
	}
	defer stopEvents()
	registry := metrics.NewKubeRegistry()
	factory := informers.NewSharedInformerFactory(client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	gateFactory := schedulecontroller.NewGateInformerFactory(client, o.namespace, o.settings.GateName)
	runs, err := newControllers(deps{
		Client: client, Dynamic: dyn, Factory: factory, DynFactory: dynFactory, GateFactory: gateFactory,
		Clock: clock.RealClock{}, Recorder: recorder,
		Registry: registry, Namespace: o.namespace, Settings: o.settings,
	})
	if err != nil {
		return err
	}
	endpoints, err := ServeEndpoints(ctx, o.endpoints, registry, client)
	if err != nil {
		return err
	}
	defer endpoints.Stop()
	if _, err := serveWebhook(ctx, o.webhook, dyn); err != nil {
		return err
	}
	// The informers the controllers asked for in their constructors start
	// with the work, once this replica leads, and stop after every worker
	// has returned.
	start := func(ctx context.Context) {
		factory.Start(ctx.Done())
		dynFactory.Start(ctx.Done())
		gateFactory.Start(ctx.Done())
		defer gateFactory.Shutdown()
		defer dynFactory.Shutdown()
		defer factory.Shutdown()
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Go(func() { r.Run(ctx, o.settings.Workers) })
		}
		wg.Wait()
	}
	if !o.leaderElect {
		start(ctx)
		return nil
	}
	return o.leadAndRun(ctx, client, start)
}

// clients builds the typed and the dynamic client from --kubeconfig (or the
// in-cluster configuration).
func (o *runOptions) clients() (kubernetes.Interface, dynamic.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("dynamic client: %w", err)
	}
	return client, dyn, nil
}

// newControllers builds every controller of controllers() from d; each asks
// d's factories for its informers.
func newControllers(d deps) ([]runnable, error) {
	var runs []runnable
	for _, c := range controllers() {
		r, err := c.New(d)
		if err != nil {
			return nil, fmt.Errorf("controller %s: %w", c.Name, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// leadAndRun runs start while this replica holds the leader lease and
// returns an error when the lease is lost before ctx ends.
func (o *runOptions) leadAndRun(ctx context.Context, client kubernetes.Interface, start func(context.Context)) error {
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.namespace, Name: o.leaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.identity},
	}
	lost := errors.New("leader lease lost")
	var result error
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: o.leaseName,
		LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: start,
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					// Exit so that the Deployment restarts the replica as a
					// candidate; in-flight steps are finished by the next leader.
					result = lost
				}
				logger.Info("Stopped leading", "identity", o.identity)
			},
			OnNewLeader: func(id string) { logger.Info("Leader", "identity", id) },
		},
	})
	return result
}
