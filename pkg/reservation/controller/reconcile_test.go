package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// TestSameObjects: what the API server fills in (a taint's TimeAdded) is no
// difference, what the controller sets is.
func TestSameObjects(t *testing.T) {
	res := &rotav1.GPUReservation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}, Spec: rotav1.GPUReservationSpec{Mode: rotav1.ReservationTimeSliced}}
	want := taintRule(res, "n1", "gpu-0")
	stored := want.DeepCopy()
	stored.Spec.Taint.TimeAdded = &metav1.Time{Time: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)}
	if !sameRule(stored, want) {
		t.Error("a rule differing only in TimeAdded is reported different")
	}
	if sameRule(taintRule(res, "n1", "gpu-1"), want) {
		t.Error("rules for different devices are reported the same")
	}
	claim := quotaClaim(res, DefaultQuotaDeviceClass, 2)
	if !sameCharge(claim, quotaClaim(res, DefaultQuotaDeviceClass, 2)) || sameCharge(claim, quotaClaim(res, DefaultQuotaDeviceClass, 3)) {
		t.Error("quota claims compared wrongly")
	}
	a, _ := memberClass(res, []GPU{{UUID: "GPU-0"}})
	b, _ := memberClass(res, []GPU{{UUID: "GPU-0"}, {UUID: "GPU-1"}})
	if !sameClass(a, a.DeepCopy()) || sameClass(a, b) {
		t.Error("classes compared wrongly")
	}
	if got, want := a.Spec.Selectors[0].CEL.Expression, `device.driver == "gpu.rota.dev" && device.attributes["gpu.rota.dev"].uuid in ["GPU-0"]`; got != want {
		t.Errorf("class selector %q, want %q", got, want)
	}
}
