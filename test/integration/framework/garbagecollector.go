package framework

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
)

// gcSyncPeriod is how often the garbage collector rediscovers the served
// resources (CRDs installed after it started) and its REST mapper resets.
const gcSyncPeriod = 2 * time.Second

// StartGarbageCollector runs kube-controller-manager's garbage collector,
// which deletes objects whose owners are gone (for example a
// LeaderWorkerSet group's worker StatefulSet once its leader pod is
// deleted), until the test ends.
func (cp *ControlPlane) StartGarbageCollector(tb testing.TB) {
	tb.Helper()
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	metadataClient, err := metadata.NewForConfig(cp.Config)
	if err != nil {
		cancel()
		tb.Fatalf("metadata client: %v", err)
	}
	discoveryClient := cacheddiscovery.NewMemCacheClient(cp.Client.Discovery())
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(discoveryClient)
	restMapper.Reset()
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	metadataFactory := metadatainformer.NewSharedInformerFactory(metadataClient, 0)
	started := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, cp.Client, metadataClient, restMapper,
		garbagecollector.DefaultIgnoredResources(), informerfactory.NewInformerFactory(factory, metadataFactory), started)
	if err != nil {
		cancel()
		tb.Fatalf("garbage collector: %v", err)
	}
	factory.Start(ctx.Done())
	metadataFactory.Start(ctx.Done())
	close(started)
	var wg sync.WaitGroup
	wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { restMapper.Reset() }, gcSyncPeriod) })
	wg.Go(func() { gc.Run(ctx, 2, gcSyncPeriod) })
	wg.Go(func() { gc.Sync(ctx, cp.Client.Discovery(), gcSyncPeriod) })
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		metadataFactory.Shutdown()
	})
}
