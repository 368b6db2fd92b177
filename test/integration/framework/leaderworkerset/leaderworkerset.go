// Package leaderworkerset runs the LeaderWorkerSet controller of
// sigs.k8s.io/lws in the test process, against a framework control plane.
//
// It is a package of its own, not part of framework, because the
// controller is built on controller-runtime, whose init claims client-go's
// process-wide work-queue and leader-election metrics providers: only the
// test binaries that run LeaderWorkerSets link it.
package leaderworkerset

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
	lwscontrollers "sigs.k8s.io/lws/pkg/controllers"
	lwswebhooks "sigs.k8s.io/lws/pkg/webhooks"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// Module is the Go module whose controller, CRD and webhook configuration
// run; its version is the one go.mod requires.
const Module = "sigs.k8s.io/lws"

// QPS and burst of the controller's client: lws's own defaults
// (cmd/main.go's --kube-api-qps and --kube-api-burst).
const (
	clientQPS   = 500
	clientBurst = 500
)

// setLogger gives controller-runtime's process-wide root logger klog's
// once; code of lws that logs through it (the admission webhooks) would
// otherwise print a warning with a stack trace after 30 s.
var setLogger sync.Once

// Start runs the LeaderWorkerSet controller the way lws's cmd/main.go runs
// it, until the test ends:
//   - its CRD (config/crd/bases in the module) installed and established;
//   - its manager with the LeaderWorkerSet and Pod reconcilers and their
//     field index, no leader election, no metrics or probe listeners;
//   - its defaulting and validating admission webhooks for LeaderWorkerSets
//     and pods (the pod webhook gives each pod its group-index,
//     worker-index and group-key labels and LWS_* environment), served
//     over TLS on loopback and registered with the apiserver by URL from
//     the module's config/webhook, patches included (webhook.go);
//   - kube-controller-manager's StatefulSet controller, which turns the
//     leader and worker StatefulSets into pods, and its garbage collector,
//     which deletes a group's worker StatefulSet once its leader pod is gone.
//
// Not run: DisaggregatedSets (their CRD, controller and webhook), gang
// scheduling providers, and lws's certificate rotation (the webhook
// serves the test server's own certificate).
func Start(tb testing.TB, cp *framework.ControlPlane) {
	tb.Helper()
	dir := InstallCRD(tb, cp)
	cp.StartStatefulSetController(tb)
	cp.StartGarbageCollector(tb)

	logger := ktesting.NewLogger(tb, ktesting.NewConfig(ktesting.Verbosity(1)))
	setLogger.Do(func() { ctrllog.SetLogger(klog.Background()) })
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(lwsv1.AddToScheme(scheme))

	hooks := startWebhookServer(tb)
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	// The test apiserver's loopback configuration asks for protobuf, which
	// controller-runtime cannot write for a custom resource's status; lws in
	// a cluster talks JSON (a kubeconfig's default).
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, ""
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          hooks,
		// Controller names are checked for uniqueness process-wide; every
		// test runs its own manager with the same names.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		tb.Fatalf("LeaderWorkerSet manager: %v", err)
	}
	if err := lwscontrollers.SetupIndexes(mgr.GetFieldIndexer()); err != nil {
		tb.Fatalf("LeaderWorkerSet indexes: %v", err)
	}
	if err := lwscontrollers.NewLeaderWorkerSetReconciler(mgr.GetClient(), mgr.GetScheme(), mgr.GetEventRecorder("leaderworkerset")).SetupWithManager(mgr); err != nil {
		tb.Fatalf("LeaderWorkerSet reconciler: %v", err)
	}
	if err := lwscontrollers.NewPodReconciler(mgr.GetClient(), mgr.GetScheme(), mgr.GetEventRecorder("leaderworkerset"), nil).SetupWithManager(mgr); err != nil {
		tb.Fatalf("LeaderWorkerSet pod reconciler: %v", err)
	}
	if err := lwswebhooks.SetupLeaderWorkerSetWebhook(mgr); err != nil {
		tb.Fatalf("LeaderWorkerSet webhook: %v", err)
	}
	if err := lwswebhooks.NewPodWebhook(nil).Setup(mgr); err != nil {
		tb.Fatalf("LeaderWorkerSet pod webhook: %v", err)
	}

	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			tb.Errorf("LeaderWorkerSet manager: %v", err)
		}
	})
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
		hooks.close()
	})
	registerWebhooks(tb, cp, dir, hooks)
}

// InstallCRD installs the LeaderWorkerSet CRD of the module go.mod
// requires and waits until discovery serves its API (components that ask
// discovery once at start, like the reservation controller and Rota's
// scheduler plugin, must start after it). It returns the module's
// directory.
func InstallCRD(tb testing.TB, cp *framework.ControlPlane) string {
	tb.Helper()
	dir := moduleDir(tb)
	cp.InstallCRDFiles(tb, filepath.Join(dir, "config", "crd", "bases", "leaderworkerset.x-k8s.io_leaderworkersets.yaml"))
	framework.WaitFor(tb, "the LeaderWorkerSet API in discovery", func(context.Context) (bool, string, error) {
		_, err := cp.Client.Discovery().ServerResourcesForGroupVersion(rotav1.LeaderWorkerSetGroupVersion)
		return err == nil, fmt.Sprintf("not served yet: %v", err), nil
	})
	return dir
}

// moduleDir is the directory of the lws module go.mod requires, in the
// module cache: its CRD and webhook configuration are read from there, so
// they always match the controller compiled into the test.
func moduleDir(tb testing.TB) string {
	tb.Helper()
	cmd := exec.CommandContext(tb.Context(), "go", "list", "-m", "-f", "{{.Dir}}", Module)
	cmd.Dir = framework.RepoRoot(tb)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		tb.Fatalf("locate %s: go list -m: %v %s", Module, err, stderr)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		tb.Fatalf("locate %s: not in the module cache (run go mod download %s)", Module, Module)
	}
	return dir
}
