package schedule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

// The controller's identity as manifests/schedule-controller ships it.
const (
	controllerSA   = "rota-schedule-controller"
	controllerUser = "system:serviceaccount:" + gateNS + ":" + controllerSA
)

// applyManifestFile creates every object of a shipped YAML file.
func applyManifestFile(t *testing.T, cp *framework.ControlPlane, rel string) {
	t.Helper()
	for _, m := range framework.Manifests(t, rel) {
		if _, err := cp.CreateManifest(t, m.Object); err != nil {
			t.Fatalf("%s: create %s %s: %v", rel, m.Object.GetKind(), m.Object.GetName(), err)
		}
	}
}

// access is one request the controller's identity may or may not make.
type access struct {
	verb, group, resource, namespace, name string
}

func (a access) String() string {
	return fmt.Sprintf("%s %s.%s %s/%s", a.verb, a.resource, a.group, a.namespace, a.name)
}

// allowedFor asks the apiserver's authorizer whether the controller's
// ServiceAccount may make the request.
func allowedFor(t *testing.T, cp *framework.ControlPlane, a access) bool {
	t.Helper()
	sar, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   controllerUser,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + gateNS, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview %s: %v", a, err)
	}
	return sar.Status.Allowed
}

// The apiserver authorizes with RBAC, the shipped role and bindings and the
// writes policy are applied, and the controller runs as its ServiceAccount: the 08:00 and
// 18:00 release-first transitions complete, the Forecast condition is
// computed (the gate read through its informer, which lists and watches the
// one ConfigMap as the ServiceAccount), and what the role does not grant is
// refused. Then list on Services is taken away: the alias check of
// Tuesday 08:00 fails with Forbidden and the stop fails closed (AliasBlocked),
// with nothing released.
func TestLeastPrivilegeRBAC(t *testing.T) {
	cp := framework.StartControlPlaneWith(t, framework.ControlPlaneOptions{APIServerFlags: []string{"--authorization-mode=RBAC"}})
	e, obs := nightWorkloads(t, at(19, 7, 0), nightOptions{cp: cp})
	applyManifestFile(t, cp, "manifests/schedule-controller/rbac.yaml")
	applyManifestFile(t, cp, "manifests/schedule-controller/writes-policy.yaml")
	applyManifestFile(t, cp, "manifests/schedule-controller/events-policy.yaml")
	// The authorizer learns of new roles and bindings through its informers.
	framework.WaitFor(t, "the shipped RBAC to take effect", func(context.Context) (bool, string, error) {
		return allowedFor(t, cp, access{"watch", "", "configmaps", gateNS, controller.DefaultGateName}), "not yet allowed", nil
	})
	sa := cp.ImpersonateServiceAccount(gateNS, controllerSA)
	client, err := kubernetes.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}

	// RBAC decides: the role grants what the controller calls and no more.
	for _, a := range []access{
		{"update", "apps", "deployments", ns, "md-qwen32b"},
		{"update", "leaderworkerset.x-k8s.io", "leaderworkersets", ns, "lws-llama70b"},
		// The workload informers the controller and its forecast read
		// targets from.
		{"list", "apps", "deployments", "", ""},
		{"watch", "apps", "deployments", "", ""},
		{"list", "apps", "statefulsets", "", ""},
		{"watch", "apps", "statefulsets", "", ""},
		{"list", "leaderworkerset.x-k8s.io", "leaderworkersets", "", ""},
		{"watch", "leaderworkerset.x-k8s.io", "leaderworkersets", "", ""},
		{"list", "", "services", ns, ""},
		{"watch", "rota.dev", "deployschedules", "", ""},
		{"list", "rota.dev", "gpureservations", "", ""},
		{"update", "rota.dev", "deployschedules/status", ns, weekName},
		// The gate informer: list and watch with a metadata.name field
		// selector, which the authorizer checks as a request on that name.
		{"list", "", "configmaps", gateNS, controller.DefaultGateName},
		{"watch", "", "configmaps", gateNS, controller.DefaultGateName},
		{"create", "", "events", ns, ""},
		{"patch", "", "events", ns, ""},
	} {
		if !allowedFor(t, cp, a) {
			t.Errorf("the controller may not %s", a)
		}
	}
	for _, a := range []access{
		{"delete", "apps", "deployments", ns, "md-qwen32b"},
		{"patch", "apps", "deployments", ns, "md-qwen32b"},
		{"delete", "leaderworkerset.x-k8s.io", "leaderworkersets", ns, "lws-llama70b"},
		{"create", "", "pods", ns, ""},
		{"list", "", "secrets", ns, ""},
		{"update", "rota.dev", "deployschedules", ns, weekName},
		{"update", "", "configmaps", gateNS, controller.DefaultGateName},
		{"get", "", "configmaps", gateNS, "some-other-config"},
		// Only the gate: not every ConfigMap of its namespace.
		{"list", "", "configmaps", gateNS, ""},
		{"watch", "", "configmaps", gateNS, ""},
		{"watch", "", "configmaps", gateNS, "some-other-config"},
		{"update", "coordination.k8s.io", "leases", gateNS, "another-lease"},
	} {
		if allowedFor(t, cp, a) {
			t.Errorf("the controller may %s, which it never needs", a)
		}
	}
	if _, err := client.CoreV1().Secrets(ns).List(e.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as the controller: %v, want Forbidden (is RBAC on?)", err)
	}
	// The leader Lease of `schedule-controller run`: create, read, renew.
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: gateNS, Name: "rota-schedule-controller"},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "replica-0"},
	}
	now := metav1.NewTime(time.Now())
	record := resourcelock.LeaderElectionRecord{HolderIdentity: "replica-0", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
	if err := lock.Create(e.ctx, record); err != nil {
		t.Fatalf("create the leader Lease as the controller: %v", err)
	}
	if _, _, err := lock.Get(e.ctx); err != nil {
		t.Fatalf("read the leader Lease as the controller: %v", err)
	}
	record.RenewTime = metav1.NewTime(now.Add(time.Second))
	if err := lock.Update(e.ctx, record); err != nil {
		t.Fatalf("renew the leader Lease as the controller: %v", err)
	}

	// The writes policy decides too (the transitions below then pass it
	// with their real writes).
	waitWritesPolicy(t, client, "md-qwen32b")

	// Two full release-first transitions as the ServiceAccount. At 08:00
	// qwen32b's stop has no consent, so the alias check lists Services.
	e.createSchedule(readExample(t, "deployschedule-week.yaml"))
	e.startControllerAs(client, dyn, nil)
	e.convergedSince(weekName, at(19, 7, 0), 50)
	// The capacity forecast reads what it needs with the shipped role.
	if c := e.waitForecast(weekName, metav1.ConditionTrue); c.Reason != v1alpha1.ReasonForecastFits {
		t.Errorf("Forecast %s: %s", c.Reason, c.Message)
	}
	for _, b := range []struct {
		at          time.Time
		llama, qwen int32
	}{{at(19, 8, 0), 1, 0}, {at(19, 18, 0), 0, 1}} {
		e.clock.SetTime(b.at)
		e.convergedSince(weekName, b.at, 400)
		if l, q := e.replicas("md-llama70b"), e.replicas("md-qwen32b"); l != b.llama || q != b.qwen {
			t.Fatalf("%s: llama70b %d qwen32b %d, want %d %d", b.at.Format(time.RFC3339), l, q, b.llama, b.qwen)
		}
	}
	// Its Events were written with its own identity.
	e.waitEvent(weekName, v1.EventTypeNormal, controller.ReasonConverged, "target llama70b: Converged")

	// Take list on Services away.
	role, err := cp.Client.RbacV1().ClusterRoles().Get(e.ctx, controllerSA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range role.Rules {
		role.Rules[i].Resources = slices.DeleteFunc(role.Rules[i].Resources, func(r string) bool { return r == "services" })
	}
	if _, err := cp.Client.RbacV1().ClusterRoles().Update(e.ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "list on Services to be refused", func(context.Context) (bool, string, error) {
		return !allowedFor(t, cp, access{"list", "", "services", ns, ""}), "still allowed", nil
	})

	e.clock.SetTime(at(20, 8, 0))
	qwen := e.waitReason(weekName, "qwen32b", v1alpha1.TargetPhaseFailed, controller.ReasonAliasBlocked, 50)
	expectTerminal(t, qwen, v1alpha1.TargetPhaseFailed, controller.ReasonAliasBlocked,
		"could not check whether Deployment md-qwen32b serves an alias, so it keeps running",
		"list Services", "forbidden", `User "`+controllerUser+`" cannot list resource "services"`,
		"grant the controller list on services")
	llama := e.targetStatus(weekName, "llama70b")
	expectTerminal(t, llama, v1alpha1.TargetPhaseFailed, controller.ReasonTransitionAborted,
		"nothing was released: target qwen32b failed its preflight (AliasBlocked)")
	e.waitEvent(weekName, v1.EventTypeWarning, controller.ReasonAliasBlocked, "target qwen32b: Failed", "forbidden")
	e.tick(12)
	if l, q := e.replicas("md-llama70b"), e.replicas("md-qwen32b"); l != 0 || q != 1 {
		t.Errorf("after the refused check: llama70b %d qwen32b %d, want 0 and 1 (nothing released)", l, q)
	}
	if nq, nl := obs.scaleChanges("md-qwen32b"), obs.scaleChanges("md-llama70b"); nq != 2 || nl != 2 {
		t.Errorf("scale changes: qwen32b %d llama70b %d, want 2 each (Monday 08:00 and 18:00 only)", nq, nl)
	}
}

// waitWritesPolicy waits until the shipped rota-schedule-controller-writes
// policy refuses the controller's client a label on Deployment ns/name: from
// then on, every write the controller makes passes through it.
func waitWritesPolicy(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	framework.WaitFor(t, "the writes policy to refuse a label", func(ctx context.Context) (bool, string, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		metav1.SetMetaDataLabel(&d.ObjectMeta, "probe", "x")
		_, err = client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "rota-schedule-controller-writes"), fmt.Sprint(err), nil
	})
}

// asController is a client and a dynamic client that act as the
// controller's ServiceAccount.
func asController(t *testing.T, cp *framework.ControlPlane) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	cfg := cp.ImpersonateServiceAccount(gateNS, controllerSA)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, dyn
}
