package framework

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/controller/statefulset"
)

// StartStatefulSetController runs kube-controller-manager's StatefulSet
// controller, which turns a StatefulSet's replicas into pods (and
// ControllerRevisions), until the test ends.
func (cp *ControlPlane) StartStatefulSetController(tb testing.TB) {
	tb.Helper()
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	ctrl := statefulset.NewStatefulSetController(ctx,
		factory.Core().V1().Pods(),
		factory.Apps().V1().StatefulSets(),
		factory.Core().V1().PersistentVolumeClaims(),
		factory.Apps().V1().ControllerRevisions(),
		cp.Client)
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, 2) })
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
}
