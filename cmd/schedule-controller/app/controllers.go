package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/utils/clock"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/quotastatus"
	reservationcontroller "github.com/rota-dev/rota/pkg/reservation/controller"
	schedulecontroller "github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/pkg/statemetrics"
	"github.com/rota-dev/rota/pkg/usage"
)

// deps is what every controller started by `run` may use. The binary owns
// the informer factories: controllers take their informers from them in
// their constructors, and `run` starts them once this replica leads.
type deps struct {
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	Factory    informers.SharedInformerFactory
	DynFactory dynamicinformer.DynamicSharedInformerFactory
	// GateFactory sees only the gate ConfigMap
	// (schedulecontroller.NewGateInformerFactory).
	GateFactory informers.SharedInformerFactory
	Clock       clock.WithTicker
	Recorder    record.EventRecorder
	Registry    metrics.KubeRegistry
	Namespace   string // the controller's own namespace
	Settings    settings
}

// settings are the `run` flags that tune controllers.
type settings struct {
	GateName       string
	PassPeriod     time.Duration
	ProgressPeriod time.Duration
	// ForecastPeriod is how long the capacity forecast behind the Forecast
	// condition is reused; negative turns the condition off.
	ForecastPeriod time.Duration
	Workers        int
	// BudgetWebhookURL, when set, turns the budget hook on
	// (schedulecontroller.WebhookBudget), each call bounded by
	// BudgetWebhookTimeout.
	BudgetWebhookURL     string
	BudgetWebhookTimeout time.Duration
}

// budget is the budget hook the settings ask for, or nil (off).
func (s settings) budget() schedulecontroller.BudgetChecker {
	if s.BudgetWebhookURL == "" {
		return nil
	}
	return schedulecontroller.WebhookBudget{URL: s.BudgetWebhookURL, Client: &http.Client{Timeout: s.BudgetWebhookTimeout}}
}

// runnable is a started controller: it runs until ctx ends.
type runnable interface {
	Run(ctx context.Context, workers int)
}

// controllerEntry names one controller and builds it.
type controllerEntry struct {
	Name string
	New  func(d deps) (runnable, error)
}

// controllers is THE list of controllers `schedule-controller run` starts once
// this replica holds the leader lease. A new controller (such as the
// GPUReservation controller, a constructor plus Run(ctx, workers)) is added
// here and nowhere else.
func controllers() []controllerEntry {
	return []controllerEntry{
		{Name: "deployschedule", New: newDeployScheduleController},
		{Name: "gpureservation", New: newGPUReservationController},
		{Name: "gpuquota", New: newGPUQuotaStatusController},
		{Name: "usage", New: newUsageMeter},
		{Name: "statemetrics", New: newStateMetrics},
	}
}

// newStateMetrics registers the state gauges (pkg/statemetrics: the pool
// per node, model and state, waiting pods, schedule targets, reservation
// conditions) that the alerts and dashboard of manifests/monitoring read.
// They are computed at each scrape from the binary's informers, so a
// replica that does not lead exports none.
func newStateMetrics(d deps) (runnable, error) {
	if d.Registry == nil {
		return idle{}, nil
	}
	if err := d.Registry.CustomRegister(statemetrics.New(statemetrics.ListersFrom(d.Factory, d.DynFactory))); err != nil {
		return nil, fmt.Errorf("registering the state metrics: %w", err)
	}
	return idle{}, nil
}

// idle is the runnable of an entry with no work loop of its own.
type idle struct{}

func (idle) Run(ctx context.Context, _ int) { <-ctx.Done() }

// newUsageMeter counts reservation-hours and GPU-hours per tenant and
// model (pkg/usage) into the binary's registry.
func newUsageMeter(d deps) (runnable, error) {
	meter := usage.NewMeter()
	if d.Registry != nil {
		if err := meter.Register(d.Registry); err != nil {
			return nil, err
		}
	}
	return usage.NewRunner(meter, d.Clock, usage.DefaultPeriod, d.Factory, d.DynFactory.ForResource(rotav1.GPUReservationsResource)), nil
}

func newDeployScheduleController(d deps) (runnable, error) {
	return schedulecontroller.New(schedulecontroller.Options{
		Client: d.Client, Dynamic: d.Dynamic, Clock: d.Clock, Recorder: d.Recorder,
		DynFactory: d.DynFactory, Factory: d.Factory, LeaderWorkerSets: leaderWorkerSets(d),
		GateNamespace: d.Namespace, GateName: d.Settings.GateName, GateFactory: d.GateFactory,
		PassPeriod: d.Settings.PassPeriod, ProgressPeriod: d.Settings.ProgressPeriod,
		ForecastPeriod: d.Settings.ForecastPeriod,
		Registry:       d.Registry,
		Budget:         d.Settings.budget(),
	})
}

// leaderWorkerSets is the LeaderWorkerSet informer of d.DynFactory, or nil
// when the API is not served: an informer on an API that is not would
// retry for ever.
func leaderWorkerSets(d deps) informers.GenericInformer {
	if _, err := d.Client.Discovery().ServerResourcesForGroupVersion(rotav1.LeaderWorkerSetGroupVersion); err != nil {
		return nil
	}
	return d.DynFactory.ForResource(rotav1.LeaderWorkerSetsResource)
}

func newGPUReservationController(d deps) (runnable, error) {
	inf := reservationcontroller.NewInformers(d.Factory, d.DynFactory)
	// Pods of a LeaderWorkerSet can be members only where the API is served.
	if lws := leaderWorkerSets(d); lws != nil {
		inf.LeaderWorkerSets = lws
	}
	return reservationcontroller.New(reservationcontroller.Options{
		Client: d.Client, Dynamic: d.Dynamic, Clock: d.Clock, Recorder: d.Recorder, Registry: d.Registry,
		Informers: inf,
	})
}

// newGPUQuotaStatusController writes every GPUQuota's status: per model
// the tenant's guarantee, use, borrowing and lending, and whether the
// guarantees fit the pool (pkg/quotastatus).
func newGPUQuotaStatusController(d deps) (runnable, error) {
	return quotastatus.New(quotastatus.Options{
		Dynamic: d.Dynamic, Clock: d.Clock,
		Informers: quotastatus.NewInformers(d.Factory, d.DynFactory),
	})
}
