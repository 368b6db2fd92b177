package security

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/targetguard"
	"github.com/rota-dev/rota/test/integration/framework"
	"github.com/rota-dev/rota/test/integration/framework/leaderworkerset"
)

const (
	webhookName   = "rota-schedule-controller-targets"
	webhookSecret = "rota-schedule-controller-webhook-tls"
	webhookSvc    = "rota-schedule-controller-webhook"
	// webhook is the webhook's name, which the API server's refusal quotes.
	webhook = "targets.schedule-controller.rota.dev"
)

// TestScheduleControllerWritesOnlyNamedTargets: issue #38, the last point
// of Deliver 1. The writes policy lets the controller's token scale any
// workload of a namespace enabled for DeploySchedules; the shipped target
// webhook, served by targetguard from the controller's own DeploySchedule
// cache, lets it change only a workload a DeploySchedule of the same
// namespace names, and create only claim templates pinned to a
// reservation a target is bound to. The certificate comes from
// `webhook-certs`' code run as its own ServiceAccount, and the cache reads
// as the controller's; the API server reaches the webhook by URL (no
// Service routing here), with the caBundle the certificate code wrote.
// Every attempt below passes the writes policy: only the webhook refuses.
func TestScheduleControllerWritesOnlyNamedTargets(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := t.Context()
	leaderworkerset.InstallCRD(t, e.cp)
	e.cp.ApplyManifests(t, "manifests/schedule-controller/rbac.yaml", "manifests/schedule-controller/writes-policy.yaml",
		"manifests/schedule-controller/tenant-rbac.yaml", "manifests/schedule-controller/webhook.yaml")
	applyKinds(t, e.cp, "manifests/schedule-controller/webhook-certs.yaml", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
	enableDeploySchedules(t, e.cp.Client, teamA)

	// The certificate, as the webhook-certs Job makes it, also naming
	// 127.0.0.1, where this test serves the webhook.
	certs, err := kubernetes.NewForConfig(e.cp.ImpersonateServiceAccount("rota-system", "rota-schedule-controller-webhook-certs"))
	if err != nil {
		t.Fatal(err)
	}
	o := targetguard.CertOptions{Namespace: "rota-system", SecretName: webhookSecret, ServiceName: webhookSvc, WebhookName: webhookName, ExtraHosts: []string{"127.0.0.1"}}
	framework.WaitFor(t, "the webhook-certs ServiceAccount's RBAC", func(ctx context.Context) (bool, string, error) {
		_, err := targetguard.EnsureCerts(ctx, certs, o)
		return err == nil, fmt.Sprint(err), nil
	})
	if res, err := targetguard.EnsureCerts(ctx, certs, o); err != nil || res.IssuedCert || res.CABundleUpdated {
		t.Fatalf("second run of webhook-certs: %+v, %v; want nothing changed", res, err)
	}
	certDir := writeCertDir(t, e.cp.Client)

	// The webhook, with a DeploySchedule cache read as the controller.
	cfg := e.cp.ImpersonateServiceAccount("rota-system", "rota-schedule-controller")
	ctrlDyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopWebhook := serveTargetWebhook(t, ctrlDyn, certDir)
	pointWebhookAt(t, e.cp.Client, stopWebhook.url)

	for _, name := range []string{"model", "payroll"} {
		if _, err := e.cp.Client.AppsV1().Deployments(teamA).Create(ctx, gpuDeployment(teamA, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cp.Client.AppsV1().StatefulSets(teamA).Create(ctx, gpuStatefulSet(teamA, "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cp.Dynamic.Resource(rotav1.LeaderWorkerSetsResource).Namespace(teamA).Create(ctx, gpuLWS(teamA, "llm"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// team-a's schedule names Deployment model, bound to reservation night.
	week := scheduleObject(teamA, "week", "model")
	targets, _, _ := unstructured.NestedSlice(week.Object, "spec", "targets")
	targets[0].(map[string]any)["reservationName"] = "night"
	_ = unstructured.SetNestedSlice(week.Object, targets, "spec", "targets")
	if _, err := e.cp.Dynamic.Resource(rotav1.DeploySchedulesResource).Namespace(teamA).Create(ctx, week, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	update := func(c kubernetes.Interface, name string, change func(*appsv1.Deployment)) func(context.Context) error {
		return func(ctx context.Context) error {
			d, err := c.AppsV1().Deployments(teamA).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(d)
			_, err = c.AppsV1().Deployments(teamA).Update(ctx, d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	scale := func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](0)
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, gpuv1.TransitionKeyAnnotation, "week/2026-12-07T18:00/release/0")
	}
	framework.WaitFor(t, "the target webhook to decide", func(ctx context.Context) (bool, string, error) {
		if err := update(ctrl, "model", scale)(ctx); err != nil {
			return false, "model: " + err.Error(), nil
		}
		err := update(ctrl, "payroll", scale)(ctx)
		return err != nil && strings.Contains(err.Error(), webhook), fmt.Sprint(err), nil
	})

	t.Run("the writes of a named target are allowed", func(t *testing.T) {
		for what, try := range map[string]func(context.Context) error{
			"scale the named Deployment": update(ctrl, "model", scale),
			"pin the named Deployment's claims": update(ctrl, "model", func(d *appsv1.Deployment) {
				scale(d)
				d.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To("gpu-pin-0123456789")
			}),
			"create a copy pinned to the bound reservation":           createPinnedTo(ctrl, "gpu-pin-0123456789", "night"),
			"the namespace admin scales a workload no schedule names": update(e.alice, "payroll", scale),
		} {
			if err := try(ctx); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	})

	const refused = "no DeploySchedule of namespace team-a has"
	l.hostile(t, "controller token scales a Deployment no DeploySchedule names", update(ctrl, "payroll", scale),
		webhook, refused+" Deployment payroll as a target")
	l.hostile(t, "controller token pins the claims of a Deployment no DeploySchedule names", update(ctrl, "payroll", func(d *appsv1.Deployment) {
		scale(d)
		d.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To("gpu-pin-0123456789")
	}), webhook, refused+" Deployment payroll")
	l.hostile(t, "controller token scales a StatefulSet no DeploySchedule names", updateStatefulSet(ctrl, teamA, "db", func(s *appsv1.StatefulSet) {
		s.Spec.Replicas = ptr.To[int32](0)
	}), webhook, refused+" StatefulSet db")
	l.hostile(t, "controller token scales a LeaderWorkerSet no DeploySchedule names", updateLWS(ctrlDyn, teamA, "llm", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "replicas")
	}), webhook, refused+" LeaderWorkerSet llm")
	l.hostile(t, "controller token creates a copy pinned to a reservation no target is bound to", createPinnedTo(ctrl, "gpu-pin-0123456789", "day"),
		webhook, `binds a target to GPUReservation "day"`)

	t.Run("a deleted schedule names nothing", func(t *testing.T) {
		if err := e.cp.Dynamic.Resource(rotav1.DeploySchedulesResource).Namespace(teamA).Delete(ctx, "week", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.WaitFor(t, "the webhook to forget the deleted schedule", func(ctx context.Context) (bool, string, error) {
			err := update(ctrl, "model", scale)(ctx)
			return err != nil && strings.Contains(err.Error(), refused+" Deployment model"), fmt.Sprint(err), nil
		})
	})

	t.Run("without the webhook the controller's writes fail closed, nobody else's", func(t *testing.T) {
		if _, err := e.cp.Dynamic.Resource(rotav1.DeploySchedulesResource).Namespace(teamA).Create(ctx, scheduleObject(teamA, "week", "model"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.WaitFor(t, "the webhook to see the new schedule", func(ctx context.Context) (bool, string, error) {
			err := update(ctrl, "model", scale)(ctx)
			return err == nil, fmt.Sprint(err), nil
		})
		stopWebhook.stop()
		if err := update(ctrl, "model", scale)(ctx); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("the controller's write with the webhook down: %v, want refused (failurePolicy Fail)", err)
		}
		if err := update(e.alice, "payroll", scale)(ctx); err != nil {
			t.Errorf("the namespace admin's write with the webhook down: %v, want allowed (the webhook matches the controller only)", err)
		}
	})
}

// applyKinds creates the objects of file whose kind is one of kinds.
func applyKinds(t *testing.T, cp *framework.ControlPlane, file string, kinds ...string) {
	t.Helper()
	for _, m := range framework.Manifests(t, file) {
		if !slices.Contains(kinds, m.Object.GetKind()) {
			continue
		}
		if _, err := cp.CreateManifest(t, m.Object); err != nil {
			t.Fatalf("%s %s: %v", m.Object.GetKind(), m.Object.GetName(), err)
		}
	}
}

// writeCertDir writes the Secret's pair where the controller's pod mounts it.
func writeCertDir(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	s, err := c.CoreV1().Secrets("rota-system").Get(t.Context(), webhookSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, k := range []string{targetguard.CertKey, targetguard.KeyKey} {
		if err := os.WriteFile(filepath.Join(dir, k), s.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type servedWebhook struct {
	url  string
	stop func()
}

// serveTargetWebhook serves targetguard on 127.0.0.1 as the controller's
// `run --webhook-bind-address` does.
func serveTargetWebhook(t *testing.T, dyn dynamic.Interface, certDir string) servedWebhook {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	schedules := targetguard.NewInformer(dyn)
	done := make(chan struct{}, 2)
	go func() { schedules.Run(ctx); done <- struct{}{} }()
	go func() {
		if err := targetguard.Serve(ctx, ln, certDir, targetguard.New(schedules)); err != nil {
			t.Errorf("webhook: %v", err)
		}
		done <- struct{}{}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			<-done
		}
	}
	t.Cleanup(stop)
	return servedWebhook{url: "https://" + ln.Addr().String() + targetguard.Path, stop: stop}
}

// pointWebhookAt keeps the shipped webhook (rules, match condition,
// failure policy, the caBundle webhook-certs wrote) and has the API server
// call url instead of the Service.
func pointWebhookAt(t *testing.T, c kubernetes.Interface, url string) {
	t.Helper()
	cfg, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), webhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Webhooks) != 1 || len(cfg.Webhooks[0].ClientConfig.CABundle) == 0 {
		t.Fatalf("the shipped webhook configuration has %d webhooks, caBundle %q", len(cfg.Webhooks), cfg.Webhooks[0].ClientConfig.CABundle)
	}
	cfg.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url), CABundle: cfg.Webhooks[0].ClientConfig.CABundle}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(t.Context(), cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createPinnedTo creates, as c, a copy of template gpu pinned to reservation.
func createPinnedTo(c kubernetes.Interface, name, reservation string) func(context.Context) error {
	return func(ctx context.Context) error {
		tmpl := &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: name,
				Labels:      map[string]string{gpuv1.PinnedFromLabel: "gpu"},
				Annotations: map[string]string{gpuv1.ReservationAnnotation: reservation}},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: framework.DeviceClaim(teamA, name, 1).Spec},
		}
		_, err := c.ResourceV1().ResourceClaimTemplates(teamA).Create(ctx, tmpl, dryRun)
		return err
	}
}
