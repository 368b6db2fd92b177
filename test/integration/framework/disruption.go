package framework

import (
	"context"
	"sync"
	"testing"

	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/controller/disruption"
)

// StartDisruptionController runs kube-controller-manager's disruption
// controller, which keeps each PodDisruptionBudget's status (the
// disruptions it allows, from the selected pods' readiness) as the
// Eviction API reads it, until the test ends. Without it the API server
// refuses every eviction of a pod a budget selects ("still being processed").
func (cp *ControlPlane) StartDisruptionController(tb testing.TB) {
	tb.Helper()
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	discovery := cacheddiscovery.NewMemCacheClient(cp.Client.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(discovery)
	scales, err := scale.NewForConfig(cp.Config, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(discovery))
	if err != nil {
		cancel()
		tb.Fatalf("scale client: %v", err)
	}
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	dc := disruption.NewDisruptionController(ctx,
		factory.Core().V1().Pods(), factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(), factory.Apps().V1().ReplicaSets(),
		factory.Apps().V1().Deployments(), factory.Apps().V1().StatefulSets(),
		cp.Client, mapper, scales, cp.Client.Discovery())
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { dc.Run(ctx, 1) })
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
}
