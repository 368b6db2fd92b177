package reservation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	reservationcontroller "github.com/rota-dev/rota/pkg/reservation/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

const gpuQuota v1.ResourceName = gpuv1.DeviceClassName + ".deviceclass.resource.k8s.io/devices"

// setQuota creates a ResourceQuota limiting the namespace to limit GPUs of
// class gpu.rota.dev. No quota controller runs here, so the test writes the
// initial status (hard, used 0) the controller would; from then on the API
// server's quota admission charges every claim it admits.
func setQuota(t *testing.T, cp *framework.ControlPlane, namespace string, limit int64) {
	t.Helper()
	ctx := context.Background()
	hard := v1.ResourceList{gpuQuota: *resource.NewQuantity(limit, resource.DecimalSI)}
	q, err := cp.Client.CoreV1().ResourceQuotas(namespace).Create(ctx, &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "gpus"},
		Spec:       v1.ResourceQuotaSpec{Hard: hard},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status = v1.ResourceQuotaStatus{Hard: hard, Used: v1.ResourceList{gpuQuota: resource.MustParse("0")}}
	if _, err := cp.Client.CoreV1().ResourceQuotas(namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func quotaUsed(ctx context.Context, cp *framework.ControlPlane, namespace string) (int64, error) {
	q, err := cp.Client.CoreV1().ResourceQuotas(namespace).Get(ctx, "gpus", metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	used := q.Status.Used[gpuQuota]
	return used.Value(), nil
}

// TestQuotaCountsReservationOnce: a reservation charges its GPUs to its
// namespace's ResourceQuota once (its never-allocated quota claim); members
// asking for the reservation's own DeviceClass add nothing and can only be
// allocated the held GPU; a reservation that does not fit the quota stays
// Pending with QuotaExceeded and holds nothing.
func TestQuotaCountsReservationOnce(t *testing.T) {
	cp := setup(t)
	ctx := context.Background()
	setQuota(t, cp, tenant, 2)

	createReservation(t, cp, timeSliced(tenant, "serving", 1, member("a", "md-a")))
	res := waitForReservation(t, cp, tenant, "serving", "Bound", func(r *rotav1.GPUReservation) bool {
		return r.Status.Phase == rotav1.ReservationBound
	})
	framework.WaitFor(t, "the reservation charged once", func(ctx context.Context) (bool, string, error) {
		used, err := quotaUsed(ctx, cp, tenant)
		return used == 1, fmt.Sprintf("used=%d", used), err
	})
	class := reservationcontroller.ClassName(tenant, "serving")
	rs := cp.CreateDeployment(t, tenant, "md-a")
	cp.Create(t, framework.WithDeviceClass(framework.SharedGPUTemplate(tenant, "member", 20480, reservedToleration(tenant, "serving")), class))
	for i := range 3 {
		p := framework.ReplicaPod(rs, fmt.Sprintf("a-%d", i), schedulerName, "member")
		cp.Create(t, p)
		cp.WaitForPodBound(t, tenant, p.Name)
		if got := allocatedDevices(t, cp, p); len(got) != 1 || got[0] != res.Status.Devices[0].Device {
			t.Errorf("member %s allocated %v, want the held %s", p.Name, got, res.Status.Devices[0].Device)
		}
	}
	if used, err := quotaUsed(ctx, cp, tenant); err != nil || used != 1 {
		t.Errorf("after 3 members: %d GPUs charged (%v), want 1", used, err)
	}

	// Two more GPUs do not fit a quota of 2 with 1 used.
	createReservation(t, cp, timeSliced(tenant, "more", 2, member("a", "md-a")))
	more := waitForReservation(t, cp, tenant, "more", "Pending with QuotaExceeded", func(r *rotav1.GPUReservation) bool {
		return condition(r, reservationcontroller.ConditionReady).Reason == reservationcontroller.ReasonQuotaExceeded
	})
	if msg := condition(more, reservationcontroller.ConditionReady).Message; !strings.Contains(msg, "exceeded quota") || len(more.Status.Devices) != 0 {
		t.Errorf("QuotaExceeded reservation: message %q, devices %v", msg, more.Status.Devices)
	}
	rules, err := cp.Client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: gpuv1.ReservationNameLabel + "=more"})
	if err != nil || len(rules.Items) != 0 {
		t.Errorf("a reservation refused by quota holds rules %v (%v)", rules, err)
	}
	t.Logf("refused by quota: %s", condition(more, reservationcontroller.ConditionReady).Message)

	// An ordinary claim still fits the remaining GPU of the quota.
	cp.Create(t, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "ordinary"},
		Spec:       framework.SharedGPUTemplate(tenant, "x", 1024, nil).Spec.Spec,
	})
	if used, err := quotaUsed(ctx, cp, tenant); err != nil || used != 2 {
		t.Errorf("after one ordinary claim: %d GPUs charged (%v), want 2", used, err)
	}
}
