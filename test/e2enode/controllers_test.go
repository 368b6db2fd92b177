package e2enode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/certificates/rootcacertpublisher"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/serviceaccount"

	"github.com/rota-dev/rota/pkg/sandbox/controlplane"
)

// startControllers runs, in this process, the parts of
// kube-controller-manager a node's pods need (DaemonSet, Deployment,
// ReplicaSet, Job, ResourceClaim, the default ServiceAccount and the
// kube-root-ca.crt ConfigMap of every namespace) and the default
// kube-scheduler. The returned function stops them.
func startControllers(ctx context.Context, client kubernetes.Interface, kubeconfig, dir string, rootCA []byte) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var stops []func()
	stop := func() {
		cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	fail := func(err error) (func(), error) {
		stop()
		return nil, err
	}

	stopClaims, err := controlplane.StartClaimController(ctx, client)
	if err != nil {
		return fail(err)
	}
	stops = append(stops, stopClaims)

	factory := informers.NewSharedInformerFactory(client, 0)
	logger := klog.FromContext(ctx)
	ds, err := daemon.NewDaemonSetsController(ctx, factory.Apps().V1().DaemonSets(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), client, flowcontrol.NewBackOff(time.Second, 15*time.Second))
	if err != nil {
		return fail(fmt.Errorf("DaemonSet controller: %w", err))
	}
	dc, err := deployment.NewDeploymentController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client)
	if err != nil {
		return fail(fmt.Errorf("deployment controller: %w", err))
	}
	// The chart's webhook-certs Job, which writes the target webhook's
	// certificate (webhook_test.go).
	jc, err := job.NewController(ctx, client, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), nil, nil)
	if err != nil {
		return fail(fmt.Errorf("job controller: %w", err))
	}
	rsc := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, replicaset.BurstReplicas)
	sac, err := serviceaccount.NewServiceAccountsController(logger, factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(), client,
		serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return fail(fmt.Errorf("service account controller: %w", err))
	}
	pub, err := rootcacertpublisher.NewPublisher(factory.Core().V1().ConfigMaps(), factory.Core().V1().Namespaces(), client, rootCA)
	if err != nil {
		return fail(fmt.Errorf("root CA publisher: %w", err))
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ds.Run(ctx, 2) })
	wg.Go(func() { dc.Run(ctx, 2) })
	wg.Go(func() { rsc.Run(ctx, 2) })
	wg.Go(func() { jc.Run(ctx, 1) })
	wg.Go(func() { sac.Run(ctx, 1) })
	wg.Go(func() { pub.Run(ctx, 1) })
	stops = append(stops, func() { wg.Wait(); factory.Shutdown() })

	// The default scheduler places the chart's pods (the driver's
	// DaemonSet pod, rota-scheduler's and schedule-controller's).
	config := filepath.Join(dir, "default-scheduler.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
`, kubeconfig), 0o600); err != nil {
		return fail(err)
	}
	stopScheduler, err := controlplane.StartScheduler(ctx, config)
	if err != nil {
		return fail(fmt.Errorf("default scheduler: %w", err))
	}
	stops = append(stops, stopScheduler)
	return stop, nil
}
