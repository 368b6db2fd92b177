package security

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
	"github.com/rota-dev/rota/test/integration/framework"
)

// The reservation controller's identity as manifests/reservation ships it.
const (
	controllerNS = "rota-system"
	controllerSA = "rota-schedule-controller"
	gpuNode      = "hgx-h200-0"
)

// startReservationControllerAs runs pkg/reservation's controller with the
// clients given, until the test ends.
func startReservationControllerAs(t *testing.T, client kubernetes.Interface, dyn dynamic.Interface) {
	t.Helper()
	framework.StartReservationController(t, client, dyn)
}

// ownedRule is a DeviceTaintRule labelled as the reservation ns/name's.
func ownedRule(name, ns, res string, taint resourceapi.DeviceTaint) *resourceapi.DeviceTaintRule {
	return &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gpuv1.ReservationNamespaceLabel: ns, gpuv1.ReservationNameLabel: res}},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(gpuv1.DriverName), Pool: ptr.To(gpuNode), Device: ptr.To("gpu-0")},
			Taint:          taint,
		},
	}
}

// TestReservationControllerLeastPrivilege: issue #16 point 8. The shipped
// policy narrows what the reservation controller's ServiceAccount may
// write to the objects it owns: a stolen token cannot evict with
// NoExecute, untaint the cluster's other GPUs, widen a DeviceClass or
// delete a tenant's claim. Tenants cannot touch taint rules or classes at
// all. The real controller, running as that ServiceAccount, still holds
// and releases a reservation.
func TestReservationControllerLeastPrivilege(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	cfg := e.cp.ImpersonateServiceAccount(controllerNS, controllerSA)
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	saDyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Objects that are not the controller's: the cluster admin's taint
	// rule (e.g. a drain) and a tenant's claim.
	adminRule := &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "maintenance-gpu-1"},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(gpuv1.DriverName), Pool: ptr.To(gpuNode), Device: ptr.To("gpu-1")},
			Taint:          resourceapi.DeviceTaint{Key: "example.com/maintenance", Effect: resourceapi.DeviceTaintEffectNoSchedule},
		},
	}
	if _, err := e.cp.Client.ResourceV1().DeviceTaintRules().Create(ctx, adminRule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.alice.ResourceV1().ResourceClaims(teamA).Create(ctx, framework.DeviceClaim(teamA, "training", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reserved := resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: gpuv1.ReservedTaintValue(teamA, "serving"), Effect: resourceapi.DeviceTaintEffectNoSchedule}
	framework.WaitFor(t, "the controller policy to refuse", func(ctx context.Context) (bool, string, error) {
		_, err := sa.ResourceV1().DeviceTaintRules().Create(ctx, ownedRule("probe", teamA, "serving", resourceapi.DeviceTaint{Key: "x", Effect: resourceapi.DeviceTaintEffectNoSchedule}), dryRun)
		return err != nil, fmt.Sprint(err), nil
	})

	asController := "rota-reservation-controller-writes"
	l.hostile(t, "controller token evicts with a NoExecute rule", func(ctx context.Context) error {
		noExec := reserved
		noExec.Effect = resourceapi.DeviceTaintEffectNoExecute
		_, err := sa.ResourceV1().DeviceTaintRules().Create(ctx, ownedRule("rota-team-a-serving-gpu-0", teamA, "serving", noExec), dryRun)
		return err
	}, asController, "NoSchedule")
	l.hostile(t, "controller token taints with another key", func(ctx context.Context) error {
		other := resourceapi.DeviceTaint{Key: gpuv1.UnhealthyTaintKey, Effect: resourceapi.DeviceTaintEffectNoSchedule}
		_, err := sa.ResourceV1().DeviceTaintRules().Create(ctx, ownedRule("rota-team-a-serving-gpu-0", teamA, "serving", other), dryRun)
		return err
	}, asController)
	l.hostile(t, "controller token writes an unlabelled rule", func(ctx context.Context) error {
		r := ownedRule("rota-x", teamA, "serving", reserved)
		r.Labels = nil
		_, err := sa.ResourceV1().DeviceTaintRules().Create(ctx, r, dryRun)
		return err
	}, asController, "labelled")
	l.hostile(t, "controller token deletes the admin's taint rule", func(ctx context.Context) error {
		return sa.ResourceV1().DeviceTaintRules().Delete(ctx, adminRule.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}, asController)
	l.hostile(t, "controller token relabels the admin's rule as its own", func(ctx context.Context) error {
		r, err := e.cp.Client.ResourceV1().DeviceTaintRules().Get(ctx, adminRule.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		r.Labels = map[string]string{gpuv1.ReservationNamespaceLabel: teamA, gpuv1.ReservationNameLabel: "serving"}
		r.Spec.Taint = reserved
		_, err = sa.ResourceV1().DeviceTaintRules().Update(ctx, r, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}, asController)
	l.hostile(t, "controller token widens the driver's DeviceClass", func(ctx context.Context) error {
		c, err := e.cp.Client.ResourceV1().DeviceClasses().Get(ctx, gpuv1.DeviceClassName, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}
		_, err = sa.ResourceV1().DeviceClasses().Update(ctx, c, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}, asController)
	l.hostile(t, "controller token creates a class under another name", func(ctx context.Context) error {
		_, err := sa.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: "every-gpu", Labels: map[string]string{gpuv1.ReservationNamespaceLabel: teamA, gpuv1.ReservationNameLabel: "serving"}},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "gpu.rota.dev" && true`,
			}}}},
		}, dryRun)
		return err
	}, asController, "team-a.serving.reservation.rota.dev")
	// A class under the reservation's own name, rendered almost as the
	// controller renders it.
	ownClass := func(expr string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: reservationClass(teamA, "serving"), Labels: map[string]string{gpuv1.ReservationNamespaceLabel: teamA, gpuv1.ReservationNameLabel: "serving"}},
			Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}},
		}
	}
	rendered := fmt.Sprintf(`device.driver == %q && device.attributes[%q].uuid in ["GPU-0a1b2c3d-0000-0000-0000-000000000000"]`, gpuv1.DriverName, gpuv1.DriverName)
	l.hostile(t, "controller token's class selects every device behind the driver's prefix", func(ctx context.Context) error {
		_, err := sa.ResourceV1().DeviceClasses().Create(ctx, ownClass(`device.driver == "gpu.rota.dev" && true || true`), dryRun)
		return err
	}, asController, "as it renders it")
	l.hostile(t, "controller token's class adds a second selector", func(ctx context.Context) error {
		c := ownClass(rendered)
		c.Spec.Selectors = append(c.Spec.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}})
		_, err := sa.ResourceV1().DeviceClasses().Create(ctx, c, dryRun)
		return err
	}, asController, "as it renders it")
	// The cluster admin has declared the name (rota-extended-resources
	// would refuse it otherwise): the reservation class still may not use it.
	declareExtendedResource(t, e.cp.Client, "example.com/free-gpu")
	l.hostile(t, "controller token's class hands the GPUs out as an extended resource", func(ctx context.Context) error {
		c := ownClass(rendered)
		c.Spec.ExtendedResourceName = ptr.To("example.com/free-gpu")
		_, err := sa.ResourceV1().DeviceClasses().Create(ctx, c, dryRun)
		return err
	}, asController, "no extendedResourceName")
	l.hostile(t, "controller token's class gives another driver's config", func(ctx context.Context) error {
		c := ownClass(rendered)
		c.Spec.Config = []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "nic.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"mode":"promiscuous"}`)}},
		}}}
		_, err := sa.ResourceV1().DeviceClasses().Create(ctx, c, dryRun)
		return err
	}, asController, "no config but")
	l.hostile(t, "controller token's class lifts the GPUs' memory budget", func(ctx context.Context) error {
		c := ownClass(rendered)
		c.Spec.Config = []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: gpuv1.DriverName, Parameters: runtime.RawExtension{
				Raw: []byte(fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"sharing":{"strategy":%q},"memoryMiB":999999}`, gpuv1.APIVersion, gpuv1.Kind, gpuv1.TimeSlicing)),
			}},
		}}}
		_, err := sa.ResourceV1().DeviceClasses().Create(ctx, c, dryRun)
		return err
	}, asController, "no config but")
	t.Run("the class the controller renders is allowed", func(t *testing.T) {
		for _, timeSliced := range []bool{false, true} {
			c := ownClass(rendered)
			if timeSliced {
				c.Spec.Config = []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
					Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: gpuv1.DriverName, Parameters: runtime.RawExtension{
						Raw: []byte(fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"sharing":{"strategy":%q}}`, gpuv1.APIVersion, gpuv1.Kind, gpuv1.TimeSlicing)),
					}},
				}}}
			}
			if _, err := sa.ResourceV1().DeviceClasses().Create(ctx, c, dryRun); err != nil {
				t.Errorf("time sliced %v: %v", timeSliced, err)
			}
		}
	})
	l.hostile(t, "controller token deletes a tenant's claim", func(ctx context.Context) error {
		return sa.ResourceV1().ResourceClaims(teamA).Delete(ctx, "training", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}, asController)
	l.hostile(t, "controller token creates an allocatable claim", func(ctx context.Context) error {
		c := framework.DeviceClaim(teamA, "gpureservation-serving", 1)
		c.Labels = map[string]string{gpuv1.ReservationNamespaceLabel: teamA, gpuv1.ReservationNameLabel: "serving"}
		_, err := sa.ResourceV1().ResourceClaims(teamA).Create(ctx, c, dryRun)
		return err
	}, asController, "never-allocated quota claim")
	l.hostile(t, "tenant deletes a reservation's taint rule", func(ctx context.Context) error {
		return e.alice.ResourceV1().DeviceTaintRules().Delete(ctx, adminRule.Name, metav1.DeleteOptions{})
	}, "forbidden")
	l.hostile(t, "tenant creates a DeviceClass of the held GPUs", func(ctx context.Context) error {
		_, err := e.alice.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
		return err
	}, "forbidden")

	// The legitimate flow, as the ServiceAccount under RBAC and the policy.
	t.Run("the controller holds and releases a reservation as its ServiceAccount", func(t *testing.T) {
		e.cp.Create(t, framework.Node(gpuNode), framework.H200Slice(gpuNode, 2))
		startReservationControllerAs(t, sa, saDyn)
		res := &rotav1.GPUReservation{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "serving"},
			Spec: rotav1.GPUReservationSpec{NodeName: gpuNode, Count: ptr.To[int32](1), Mode: rotav1.ReservationExclusive, Headroom: "0.95",
				Members: []rotav1.ReservationMember{{Name: "api", WorkloadRef: rotav1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"}}}},
		}
		u, err := rsv.ToUnstructured(res)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.cp.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(teamA).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.WaitFor(t, "the reservation to hold a GPU with its rule, class and quota claim", func(ctx context.Context) (bool, string, error) {
			got, err := e.cp.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(teamA).Get(ctx, "serving", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			r, err := rsv.FromObject(got)
			if err != nil {
				return false, "", err
			}
			_, classErr := e.cp.Client.ResourceV1().DeviceClasses().Get(ctx, reservationClass(teamA, "serving"), metav1.GetOptions{})
			_, claimErr := e.cp.Client.ResourceV1().ResourceClaims(teamA).Get(ctx, "gpureservation-serving", metav1.GetOptions{})
			return r.Status.Phase == rotav1.ReservationBound && classErr == nil && claimErr == nil,
				fmt.Sprintf("phase %s conditions %+v class %v claim %v", r.Status.Phase, r.Status.Conditions, classErr, claimErr), nil
		})
		if err := e.cp.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(teamA).Delete(ctx, "serving", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.WaitFor(t, "the reservation, its rule, class and quota claim to be gone", func(ctx context.Context) (bool, string, error) {
			_, resErr := e.cp.Dynamic.Resource(rotav1.GPUReservationsResource).Namespace(teamA).Get(ctx, "serving", metav1.GetOptions{})
			_, classErr := e.cp.Client.ResourceV1().DeviceClasses().Get(ctx, reservationClass(teamA, "serving"), metav1.GetOptions{})
			_, claimErr := e.cp.Client.ResourceV1().ResourceClaims(teamA).Get(ctx, "gpureservation-serving", metav1.GetOptions{})
			rules, err := e.cp.Client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: gpuv1.ReservationNameLabel + "=serving"})
			if err != nil {
				return false, "", err
			}
			gone := apierrors.IsNotFound(resErr) && apierrors.IsNotFound(classErr) && apierrors.IsNotFound(claimErr) && len(rules.Items) == 0
			return gone, fmt.Sprintf("reservation %v class %v claim %v rules %d", resErr, classErr, claimErr, len(rules.Items)), nil
		})
		if _, err := e.cp.Client.ResourceV1().DeviceTaintRules().Get(ctx, adminRule.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the admin's rule: %v", err)
		}
	})
}
