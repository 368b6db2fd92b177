package security

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

const (
	teamA = "team-a"
	teamB = "team-b"
	alice = "alice" // admin of team-a
	bob   = "bob"   // admin of team-b
	// rotaScheduler is the scheduler name in the shipped parameter object.
	rotaScheduler = "rota-scheduler"
	paramsNS      = "rota-system"
	paramsName    = "rota-admission"
)

// env is a control plane with RBAC, the shipped policies and two tenants.
type env struct {
	cp         *framework.ControlPlane
	alice, bob kubernetes.Interface
}

// setup starts kube-apiserver with RBAC (and resource.k8s.io's beta
// versions served), runs the ClusterRole aggregation
// controller, applies the driver's DeviceClasses, RBAC and policy, and the admission and
// reservation manifests as shipped, makes alice admin of team-a and bob of
// team-b, and waits until every shipped policy decides.
func setup(t *testing.T) *env {
	t.Helper()
	cp := framework.StartControlPlaneWith(t, framework.ControlPlaneOptions{APIServerFlags: []string{
		"--authorization-mode=RBAC",
		// resource.k8s.io's beta versions are off by default in 1.37; a
		// cluster may still serve them, and the policies must hold there.
		"--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true",
	}})
	cp.StartRoleAggregation(t)
	cp.ApplyManifests(t, "manifests/driver/namespace.yaml", "manifests/driver/deviceclass.yaml", "manifests/driver/rbac.yaml")
	cp.ApplyManifests(t, framework.ManifestDir(t, "manifests/admission")...)
	cp.ApplyManifests(t, framework.ManifestDir(t, "manifests/reservation")...)
	e := &env{cp: cp, alice: cp.NamespaceAdmin(t, alice, teamA), bob: cp.NamespaceAdmin(t, bob, teamB)}
	// The API server loads policies through informers: wait until each of
	// them answers (dry runs, so nothing is left behind).
	framework.WaitFor(t, "the pod policies to route and refuse", func(ctx context.Context) (bool, string, error) {
		routed, err := e.alice.CoreV1().Pods(teamA).Create(ctx, gpuPod(teamA, "probe", v1.DefaultSchedulerName), dryRun)
		if err != nil {
			return false, err.Error(), nil
		}
		if routed.Spec.SchedulerName != rotaScheduler {
			return false, "not routed yet", nil
		}
		_, err = e.alice.CoreV1().Pods(teamA).Create(ctx, gpuPod(teamA, "probe", "other"), dryRun)
		return err != nil, fmt.Sprint(err), nil
	})
	framework.WaitFor(t, "the reserved-GPU policy to refuse", func(ctx context.Context) (bool, string, error) {
		_, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, tolerating(teamA, "probe", teamB, "r"), dryRun)
		return err != nil, fmt.Sprint(err), nil
	})
	return e
}

var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// gpuPod is a pod with one claim from the template "gpu" on schedulerName.
func gpuPod(namespace, name, schedulerName string) *v1.Pod {
	return framework.GPUPod(namespace, name, schedulerName, "gpu")
}

// ledger counts the hostile attempts of one test and their denials.
type ledger struct {
	mu               sync.Mutex
	attempts, denied int
}

// newLedger logs the count when the test ends and fails it unless every
// attempt was denied.
func newLedger(t *testing.T) *ledger {
	l := &ledger{}
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Logf("hostile attempts: %d attempts, %d denied", l.attempts, l.denied)
		if l.denied != l.attempts {
			t.Errorf("%d of %d hostile attempts were not denied", l.attempts-l.denied, l.attempts)
		}
	})
	return l
}

// hostile runs one hostile attempt as a subtest "attempt: <name>"; it is
// denied when try returns an error containing every one of wants.
func (l *ledger) hostile(t *testing.T, name string, try func(ctx context.Context) error, wants ...string) {
	t.Helper()
	t.Run("attempt: "+name, func(t *testing.T) {
		err := try(t.Context())
		ok := err != nil
		for _, w := range wants {
			ok = ok && strings.Contains(err.Error(), w)
		}
		l.mu.Lock()
		l.attempts++
		if ok {
			l.denied++
		}
		l.mu.Unlock()
		if !ok {
			t.Fatalf("not denied as expected: error %v, want one containing %q", err, wants)
		}
		t.Logf("denied: %v", err)
	})
}

// names is the device class a reservation keeps (pkg/reservation/controller.ClassName).
func reservationClass(namespace, name string) string {
	return gpuv1.ReservedTaintValue(namespace, name) + gpuv1.ReservationClassSuffix
}

// tolerating is a claim of one GPU that tolerates the reservation
// resNS/resName's taint.
func tolerating(namespace, name, resNS, resName string) *resourceapi.ResourceClaim {
	c := framework.DeviceClaim(namespace, name, 1)
	c.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{
		Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual,
		Value: gpuv1.ReservedTaintValue(resNS, resName), Effect: resourceapi.DeviceTaintEffectNoSchedule,
	}}
	return c
}
