package controller

import (
	"errors"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// Defaults of Options.
const (
	DefaultPassPeriod         = 30 * time.Second
	DefaultProgressPeriod     = 5 * time.Second
	DefaultForecastPeriod     = time.Minute
	DefaultForecastRange      = 7 * 24 * time.Hour
	DefaultLookback           = 8 * 24 * time.Hour
	DefaultGateName           = "rota-schedule-gate"
	DefaultStopTimeout        = 10 * time.Minute
	DefaultCapacityTimeout    = 15 * time.Minute
	DefaultReadinessTimeout   = 10 * time.Minute
	DefaultUnschedulableGrace = 2 * time.Minute
)

// Options configure a Controller. Client, Dynamic, Clock, Recorder and
// GateNamespace are required (New returns an error without them); the rest
// have defaults.
type Options struct {
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface
	Clock    clock.WithTicker
	Recorder record.EventRecorder

	// DynFactory is the binary's shared dynamic informer factory: the
	// controller takes its DeploySchedule informer from it in New, and the
	// caller starts the factory (after New) and shuts it down, as for the
	// reservation controller. Run needs it. A controller built without it
	// runs passes only through Reconcile (tests, benchmarks) and reads
	// ownership from the API.
	DynFactory dynamicinformer.DynamicSharedInformerFactory
	// Factory is the binary's shared typed informer factory: with it, the
	// controller and its forecast read the Deployments and StatefulSets
	// that schedules target from its informers (taken in New, started by
	// the caller) instead of one GET each. Without it they are read from
	// the API.
	Factory informers.SharedInformerFactory
	// LeaderWorkerSets is the LeaderWorkerSet informer of DynFactory, set by
	// the caller only when the LeaderWorkerSet API is served (an informer on
	// an API that is not retries for ever). Nil: LeaderWorkerSets are read
	// from the API, which tells a missing CRD from a missing object.
	LeaderWorkerSets informers.GenericInformer

	// GateNamespace and GateName locate the ConfigMap holding the cluster-wide
	// switch (key "mode": off, observe or on). Missing or unreadable means off.
	GateNamespace string
	GateName      string
	// GateFactory, when set, is NewGateInformerFactory(Client, GateNamespace,
	// GateName): passes read the gate from its ConfigMap informer (taken in
	// New, started by the caller with its other factories; not synced reads
	// as unreadable) instead of one GET each, and a change of the switch
	// queues every schedule.
	GateFactory informers.SharedInformerFactory

	// PassPeriod is how often every schedule is re-evaluated (eligibility,
	// drift) when no boundary is nearer. Default 30s.
	PassPeriod time.Duration
	// ProgressPeriod is how often a schedule with a step in flight is looked at.
	// Default 5s.
	ProgressPeriod time.Duration
	// Lookback bounds how far back a pass looks for the start of the current
	// intent interval. Default 8 days.
	Lookback time.Duration
	// UnschedulableGrace is how long a started pod may be unschedulable before
	// the step fails with StartUnschedulable. Default 2m.
	UnschedulableGrace time.Duration

	// ForecastPeriod is how long a capacity forecast (the Forecast
	// condition) is reused before the cluster is read again; a change of any
	// DeploySchedule's spec forgets it at once. Default 1m; negative turns
	// the Forecast condition off.
	ForecastPeriod time.Duration
	// ForecastRange is how far ahead the forecast looks. Default 7 days.
	ForecastRange time.Duration

	// Failpoints, when set, are called around every workload mutation.
	Failpoints Failpoints
	// Registry, when set, receives the controller's metrics.
	Registry metrics.KubeRegistry
	// Budget, when set, is asked in every transition's preflight about what
	// its acquire steps add (BudgetChecker). Nil (the default) is off.
	Budget BudgetChecker
}

func (o *Options) defaultAndValidate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("options: Client is required"))
	}
	if o.Dynamic == nil {
		errs = append(errs, errors.New("options: Dynamic is required"))
	}
	if o.Clock == nil {
		errs = append(errs, errors.New("options: Clock is required"))
	}
	if o.Recorder == nil {
		errs = append(errs, errors.New("options: Recorder is required"))
	}
	if o.GateNamespace == "" {
		errs = append(errs, errors.New("options: GateNamespace is required"))
	}
	if o.GateName == "" {
		o.GateName = DefaultGateName
	}
	if o.PassPeriod <= 0 {
		o.PassPeriod = DefaultPassPeriod
	}
	if o.ProgressPeriod <= 0 {
		o.ProgressPeriod = DefaultProgressPeriod
	}
	if o.Lookback <= 0 {
		o.Lookback = DefaultLookback
	}
	if o.UnschedulableGrace <= 0 {
		o.UnschedulableGrace = DefaultUnschedulableGrace
	}
	if o.ForecastPeriod == 0 {
		o.ForecastPeriod = DefaultForecastPeriod
	}
	if o.ForecastRange <= 0 {
		o.ForecastRange = DefaultForecastRange
	}
	if o.Failpoints == nil {
		o.Failpoints = noFailpoints{}
	}
	return errors.Join(errs...)
}

// timeoutOf reads one of a schedule's spec.timeouts, falling back to def.
func timeoutOf(t *v1alpha1.ScheduleTimeouts, get func(*v1alpha1.ScheduleTimeouts) *v1alpha1.Duration, def time.Duration) time.Duration {
	if t == nil || get(t) == nil {
		return def
	}
	if d, err := schedule.ParseDuration(*get(t)); err == nil {
		return d
	}
	return def
}
