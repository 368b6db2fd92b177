package framework

import (
	"context"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
)

// StartClaimController runs kube-controller-manager's ResourceClaim controller,
// which creates a pod's claims from its ResourceClaimTemplates and releases
// them when pods go away. It stops before the control plane does.
func (cp *ControlPlane) StartClaimController(tb testing.TB) {
	tb.Helper()
	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	ctrl, err := resourceclaim.NewController(logger, cp.Client,
		factory.Core().V1().Pods(),
		factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(),
		factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		cancel()
		tb.Fatalf("create ResourceClaim controller: %v", err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx, 2)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}
