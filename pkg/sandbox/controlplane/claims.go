package controlplane

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
)

// StartClaimController runs kube-controller-manager's ResourceClaim
// controller, which creates a pod's claims from its ResourceClaimTemplates
// and releases them when pods go away. The returned function stops it.
func StartClaimController(ctx context.Context, client kubernetes.Interface) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := resourceclaim.NewController(klog.FromContext(ctx), client,
		factory.Core().V1().Pods(),
		factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(),
		factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create ResourceClaim controller: %w", err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx, 2)
	}()
	return func() {
		cancel()
		<-done
		factory.Shutdown()
	}, nil
}
