package guarantees

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
	"github.com/rota-dev/rota/pkg/quotastatus"
	rsv "github.com/rota-dev/rota/pkg/reservation"
	"github.com/rota-dev/rota/test/integration/framework"
)

const (
	teamA = "team-a"
	teamB = "team-b"
	// The schedule controller's identity as manifests/schedule-controller ships it.
	controllerNS = "rota-system"
	controllerSA = "rota-schedule-controller"
)

// setup starts kube-apiserver with RBAC, applies the schedule controller's
// and the reservation controller's shipped RBAC (the binary runs both under
// one ServiceAccount) and runs the GPUQuota status controller as that
// ServiceAccount, as `schedule-controller run` does, until the test ends.
func setup(t *testing.T) *framework.ControlPlane {
	t.Helper()
	cp := framework.StartControlPlaneWith(t, framework.ControlPlaneOptions{APIServerFlags: []string{"--authorization-mode=RBAC"}})
	cp.ApplyManifests(t, "manifests/schedule-controller/rbac.yaml", "manifests/reservation/rbac.yaml")
	cp.EnsureNamespace(t, teamA)
	cp.EnsureNamespace(t, teamB)
	cfg := cp.ImpersonateServiceAccount(controllerNS, controllerSA)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	factory := informers.NewSharedInformerFactory(client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	ctrl, err := quotastatus.New(quotastatus.Options{Dynamic: dyn, Clock: clock.RealClock{}, Informers: quotastatus.NewInformers(factory, dynFactory)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, 1) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		dynFactory.Shutdown()
	})
	return cp
}

func writeQuota(t *testing.T, cp *framework.ControlPlane, name string, guaranteed int32) {
	t.Helper()
	ctx := context.Background()
	res := cp.Dynamic.Resource(rotav1.GPUQuotasResource)
	cur, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		q := &rotav1.GPUQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: rotav1.GPUQuotaSpec{Models: []rotav1.ModelQuota{{Model: "H100", Guaranteed: guaranteed}}}}
		u, err := gpuquota.ToUnstructured(q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create GPUQuota %s: %v", name, err)
		}
		return
	}
	q, err := gpuquota.FromObject(cur)
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Models[0].Guaranteed = guaranteed
	u, err := gpuquota.ToUnstructured(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update GPUQuota %s: %v", name, err)
	}
}

// want is what a GPUQuota's status must say.
type want struct {
	generation int64
	model      rotav1.ModelQuotaStatus
	fits       metav1.ConditionStatus
	reason     string
	message    string
}

func waitForStatus(t *testing.T, cp *framework.ControlPlane, name string, w want) {
	t.Helper()
	framework.WaitFor(t, "the status of GPUQuota "+name, func(ctx context.Context) (bool, string, error) {
		u, err := cp.Dynamic.Resource(rotav1.GPUQuotasResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		q, err := gpuquota.FromObject(u)
		if err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(q.Status.Conditions, rotav1.ConditionGuaranteesFit)
		state := fmt.Sprintf("generation %d observed %d, models %+v, condition %+v", q.Generation, q.Status.ObservedGeneration, q.Status.Models, c)
		ok := q.Generation == w.generation && q.Status.ObservedGeneration == w.generation &&
			len(q.Status.Models) == 1 && q.Status.Models[0] == w.model &&
			c != nil && c.Status == w.fits && c.Reason == w.reason && c.Message == w.message && c.ObservedGeneration == w.generation
		return ok, state, nil
	})
}

// allocate creates an allocated claim of namespace holding the devices
// of node, as the scheduler leaves one.
func allocate(t *testing.T, cp *framework.ControlPlane, namespace, name, node string, devices int) {
	t.Helper()
	ctx := context.Background()
	c, err := cp.Client.ResourceV1().ResourceClaims(namespace).Create(ctx, framework.DeviceClaim(namespace, name, int64(devices)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for i := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: gpuv1.DriverName, Pool: node, Device: fmt.Sprintf("gpu-%d", i),
		})
	}
	if _, err := cp.Client.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocate claim %s/%s: %v", namespace, name, err)
	}
}

// TestGuaranteesStatus: issue #41 point 1. Two tenants guaranteed 8 H100
// each on 16 healthy H100 (a 17th, tainted unhealthy by the driver, does
// not count) fit; when B uses all 16 it borrows 8 and A lends 8; when A's
// guarantee is raised to 12 the guarantees exceed the pool, and both
// GPUQuotas say so with the numbers; GPUs that GPUReservations hold count
// once, within their namespace's guarantee. The controller runs as the schedule
// controller's ServiceAccount under the shipped RBAC, which lets it write
// the status.
func TestGuaranteesStatus(t *testing.T) {
	cp := setup(t)
	sick := framework.H100
	sick.Taints = []resourceapi.DeviceTaint{{Key: gpuv1.UnhealthyTaintKey, Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	cp.Create(t,
		framework.GPUSlice("hgx-0", framework.GPUs(framework.H100, 8)...),
		framework.GPUSlice("hgx-1", framework.GPUs(framework.H100, 8)...),
		framework.GPUSlice("hgx-2", sick),
	)
	writeQuota(t, cp, teamA, 8)
	writeQuota(t, cp, teamB, 8)
	fit := "H100: guarantees 16 (team-a 8, team-b 8) fit the 16 healthy GPUs"
	waitForStatus(t, cp, teamA, want{generation: 1, model: rotav1.ModelQuotaStatus{Model: "H100", Guaranteed: 8}, fits: metav1.ConditionTrue, reason: rotav1.ReasonGuaranteesFit, message: fit})
	waitForStatus(t, cp, teamB, want{generation: 1, model: rotav1.ModelQuotaStatus{Model: "H100", Guaranteed: 8}, fits: metav1.ConditionTrue, reason: rotav1.ReasonGuaranteesFit, message: fit})

	allocate(t, cp, teamB, "train-0", "hgx-0", 8)
	allocate(t, cp, teamB, "train-1", "hgx-1", 8)
	waitForStatus(t, cp, teamB, want{generation: 1, model: rotav1.ModelQuotaStatus{Model: "H100", Guaranteed: 8, Used: 16, Borrowed: 8}, fits: metav1.ConditionTrue, reason: rotav1.ReasonGuaranteesFit, message: fit})
	waitForStatus(t, cp, teamA, want{generation: 1, model: rotav1.ModelQuotaStatus{Model: "H100", Guaranteed: 8, Lent: 8}, fits: metav1.ConditionTrue, reason: rotav1.ReasonGuaranteesFit, message: fit})

	writeQuota(t, cp, teamA, 12)
	exceeds := "H100: guarantees 20 (team-a 12, team-b 8) exceed the 16 healthy GPUs by 4"
	waitForStatus(t, cp, teamA, want{generation: 2, model: rotav1.ModelQuotaStatus{Model: "H100", Guaranteed: 12, Lent: 8}, fits: metav1.ConditionFalse, reason: rotav1.ReasonGuaranteesExceedPool, message: exceeds})
	waitForStatus(t, cp, teamB, want{generation: 1, model: rotav1.ModelQuotaStatus{Model: "H100", Guaranteed: 8, Used: 16, Borrowed: 8}, fits: metav1.ConditionFalse, reason: rotav1.ReasonGuaranteesExceedPool, message: exceeds})

	// A reservation's GPUs count once: 4 reserved by team-a are within its
	// guarantee of 12; 2 reserved by team-c, which has no GPUQuota, are
	// set aside as well.
	reserve(t, cp, teamA, "serving", "hgx-0", 4)
	reserve(t, cp, "team-c", "batch", "hgx-1", 2)
	exceeds = "H100: guarantees 22 (team-a 12, team-b 8) exceed the 16 healthy GPUs by 6"
	waitForStatus(t, cp, teamA, want{generation: 2, model: rotav1.ModelQuotaStatus{Model: "H100", Guaranteed: 12, Lent: 8}, fits: metav1.ConditionFalse, reason: rotav1.ReasonGuaranteesExceedPool, message: exceeds})

	// kubectl rota pool shows the same numbers per tenant, and the fit line.
	cmd := exec.Command(framework.Binary(t, "kubectl-rota"), "--kubeconfig", cp.Kubeconfig, "pool")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl rota pool: %v\n%s", err, out)
	}
	t.Logf("kubectl rota pool:\n%s", out)
	for _, line := range []string{
		`^TENANT\s+MODEL\s+GUARANTEED\s+USED\s+BORROWED\s+LENT$`,
		`^team-a\s+H100\s+12\s+0\s+0\s+8$`,
		`^team-b\s+H100\s+8\s+16\s+8\s+0$`,
		`^` + regexp.QuoteMeta(exceeds) + `$`,
	} {
		if !regexp.MustCompile(`(?m)` + line).Match(out) {
			t.Errorf("kubectl rota pool: no line matching %s", line)
		}
	}
}

// reserve creates a GPUReservation whose status holds n healthy H100 of
// node, as the reservation controller writes it.
func reserve(t *testing.T, cp *framework.ControlPlane, namespace, name, node string, n int) {
	t.Helper()
	ctx := context.Background()
	cp.EnsureNamespace(t, namespace)
	r := &rotav1.GPUReservation{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: rotav1.GPUReservationSpec{NodeName: node, Count: ptr.To(int32(n)), Members: []rotav1.ReservationMember{{
			Name: "m", WorkloadRef: rotav1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "m"},
		}}},
	}
	u, err := rsv.ToUnstructured(r)
	if err != nil {
		t.Fatal(err)
	}
	res := cp.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(namespace)
	created, err := res.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create GPUReservation %s/%s: %v", namespace, name, err)
	}
	r, err = rsv.FromObject(created)
	if err != nil {
		t.Fatal(err)
	}
	r.Status.Phase = rotav1.ReservationBound
	for i := range n {
		r.Status.Devices = append(r.Status.Devices, rotav1.ReservedDevice{
			UUID: fmt.Sprintf("GPU-%s-%d", node, i), Pool: node, Device: fmt.Sprintf("gpu-%d", i), Model: "H100", Healthy: true,
		})
	}
	if u, err = rsv.ToUnstructured(r); err != nil {
		t.Fatal(err)
	}
	if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write the status of GPUReservation %s/%s: %v", namespace, name, err)
	}
}
