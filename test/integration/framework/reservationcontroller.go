package framework

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/events"
	reservationcontroller "github.com/rota-dev/rota/pkg/reservation/controller"
)

// StartReservationController runs pkg/reservation's controller with the
// clients given (the control plane's, or a ServiceAccount's), as the
// schedule-controller binary does, LeaderWorkerSets included where the API
// is served, until the test ends.
func StartReservationController(tb testing.TB, client kubernetes.Interface, dyn dynamic.Interface) {
	tb.Helper()
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	recorder, stopEvents, err := events.NewRecorder(ctx, client, events.ControllerComponent)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := reservationcontroller.NewInformers(factory, dynFactory)
	if _, err := client.Discovery().ServerResourcesForGroupVersion(rotav1.LeaderWorkerSetGroupVersion); err == nil {
		inf.LeaderWorkerSets = dynFactory.ForResource(rotav1.LeaderWorkerSetsResource)
	}
	ctrl, err := reservationcontroller.New(reservationcontroller.Options{
		Client: client, Dynamic: dyn, Clock: clock.RealClock{}, Registry: metrics.NewKubeRegistry(),
		Recorder: recorder, Informers: inf,
	})
	if err != nil {
		cancel()
		stopEvents()
		tb.Fatalf("create reservation controller: %v", err)
	}
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, 2) })
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		dynFactory.Shutdown()
		stopEvents()
	})
}
