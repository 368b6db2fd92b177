package integration

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"

	"github.com/rota-dev/rota/cmd/schedule-controller/app"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestScheduleControllerMetricsSecure: the schedule controller's /metrics
// name tenants' namespaces and schedules. With --metrics-secure, as the
// install runs it, an anonymous caller and an unknown token get 401, a
// ServiceAccount RBAC does not allow gets 403, one bound to get on
// /metrics reads them. The controller checks callers with its own
// ServiceAccount's token, bound to system:auth-delegator as the install
// binds it.
func TestScheduleControllerMetricsSecure(t *testing.T) {
	ctx := context.Background()
	cp := framework.StartControlPlaneWith(t, framework.ControlPlaneOptions{APIServerFlags: []string{"--authorization-mode=RBAC"}})
	cp.Create(t, framework.Namespace("monitoring"), framework.Namespace("rota-system"))
	cp.ApplyManifests(t, "manifests/schedule-controller/rbac.yaml")
	prometheus, stranger := metricsReaders(t, cp)
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Get(ctx, "rota-schedule-controller-auth-delegator", metav1.GetOptions{}); err != nil {
		t.Fatalf("the install binds the controller to system:auth-delegator: %v", err)
	}
	ctrl, err := kubernetes.NewForConfig(cp.ImpersonateServiceAccount("rota-system", "rota-schedule-controller"))
	if err != nil {
		t.Fatal(err)
	}
	reg := metrics.NewKubeRegistry()
	targets := metrics.NewGaugeVec(&metrics.GaugeOpts{Name: "rota_schedule_target_status", Help: "test"}, []string{"namespace", "schedule"})
	reg.MustRegister(targets)
	targets.WithLabelValues("team-a", "week").Set(1)
	e, err := app.ServeEndpoints(ctx, app.EndpointOptions{MetricsAddress: "127.0.0.1:0", MetricsSecure: true}, reg, ctrl)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()

	checkSecureMetrics(t, e.Metrics, prometheus, stranger, `rota_schedule_target_status{namespace="team-a",schedule="week"} 1`, "team-a")
}
