package controller

import (
	"context"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// DefaultQuotaDeviceClass is the DeviceClass a reservation is charged to in
// its namespace's ResourceQuota: the class ordinary GPU claims use.
const DefaultQuotaDeviceClass = gpuv1.DeviceClassName

// ReasonQuotaExceeded: the namespace's ResourceQuota has no room for the
// reservation's GPUs.
const ReasonQuotaExceeded = "QuotaExceeded"

// QuotaClaimName is the never-allocated claim that charges a reservation's
// GPUs to its namespace once.
func QuotaClaimName(res *rotav1.GPUReservation) string { return "gpureservation-" + res.Name }

// ClassName is the DeviceClass the controller keeps for a reservation: it
// selects exactly the held GPUs, so a member claim of this class can only be
// allocated inside the reservation, and is charged to this class, which no
// quota needs to limit (it never yields more than the GPUs already charged).
func ClassName(namespace, name string) string {
	return gpuv1.ReservedTaintValue(namespace, name) + gpuv1.ReservationClassSuffix
}

// quotaClaim is a ResourceClaim asking for the reservation's GPU count of
// the quota'd class. No pod references it and its selector matches no
// device, so it is never allocated; ResourceQuota charges a claim's requests
// when it is created.
func quotaClaim(res *rotav1.GPUReservation, class string, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: res.Namespace,
			Name:      QuotaClaimName(res),
			Labels:    map[string]string{gpuv1.ReservationNamespaceLabel: res.Namespace, gpuv1.ReservationNameLabel: res.Name},
			Annotations: map[string]string{
				gpuv1.PurposeAnnotation: "Charges the GPUs held by GPUReservation " + res.Name + " to this namespace's ResourceQuota once; never allocated.",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: rotav1.SchemeGroupVersion.String(), Kind: "GPUReservation", Name: res.Name, UID: res.UID, Controller: ptr.To(true),
			}},
		},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class,
				AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
				Count:           count,
				Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "false"}}},
			},
		}}}},
	}
}

// memberClass is the reservation's DeviceClass: the driver's GPUs with the
// held UUIDs, time-sliced when the reservation is.
func memberClass(res *rotav1.GPUReservation, held []GPU) (*resourceapi.DeviceClass, error) {
	quoted := make([]string, 0, len(held))
	for _, g := range held {
		quoted = append(quoted, fmt.Sprintf("%q", g.UUID))
	}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:   ClassName(res.Namespace, res.Name),
			Labels: map[string]string{gpuv1.ReservationNamespaceLabel: res.Namespace, gpuv1.ReservationNameLabel: res.Name},
		},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].uuid in [%s]", gpuv1.DriverName, gpuv1.DriverName, strings.Join(quoted, ", ")),
		}}}},
	}
	if res.Spec.Mode == rotav1.ReservationTimeSliced {
		class.Spec.Config = []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: gpuv1.DriverName, Parameters: runtime.RawExtension{
				Raw: []byte(fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"sharing":{"strategy":%q}}`, gpuv1.APIVersion, gpuv1.Kind, gpuv1.TimeSlicing)),
			}},
		}}}
	}
	return class, nil
}

// ensureQuotaClaim charges count GPUs (0: none) to the namespace. A quota
// refusal is returned as a SelectionError with reason QuotaExceeded.
func (c *Controller) ensureQuotaClaim(ctx context.Context, res *rotav1.GPUReservation, count int64) error {
	name := QuotaClaimName(res)
	cur, err := c.claims.ResourceClaims(res.Namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting quota claim %s/%s: %w", res.Namespace, name, err)
	}
	want := quotaClaim(res, c.quotaClass, count)
	if cur != nil && (count == 0 || !sameCharge(cur, want)) {
		// A claim's spec is immutable: a new count is a new claim.
		if err := c.client.ResourceV1().ResourceClaims(res.Namespace).Delete(ctx, name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &cur.UID},
		}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting quota claim %s/%s: %w", res.Namespace, name, err)
		}
		cur = nil
	}
	if count == 0 || cur != nil {
		return nil
	}
	_, err = c.client.ResourceV1().ResourceClaims(res.Namespace).Create(ctx, want, metav1.CreateOptions{})
	switch {
	case err == nil:
		klog.FromContext(ctx).V(2).Info("Charged reserved GPUs to the namespace", "resourceclaim", klog.KObj(want), "deviceClass", c.quotaClass, "count", count)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil // the informer has not seen it yet; the next sync compares
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		return &SelectionError{ReasonQuotaExceeded, fmt.Sprintf("%d GPU(s) of class %s do not fit the ResourceQuota of namespace %s: %v", count, c.quotaClass, res.Namespace, err)}
	default:
		return fmt.Errorf("creating quota claim %s/%s: %w", res.Namespace, name, err)
	}
}

// ensureClass keeps the reservation's DeviceClass selecting the held GPUs;
// held nil removes it.
func (c *Controller) ensureClass(ctx context.Context, res *rotav1.GPUReservation, held []GPU) error {
	classes := c.client.ResourceV1().DeviceClasses()
	name := ClassName(res.Namespace, res.Name)
	if held == nil {
		if err := classes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting DeviceClass %s: %w", name, err)
		}
		return nil
	}
	want, err := memberClass(res, held)
	if err != nil {
		return err
	}
	cur, err := c.classes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		if _, err := classes.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating DeviceClass %s: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("getting DeviceClass %s: %w", name, err)
	case !sameClass(cur, want):
		upd := cur.DeepCopy()
		upd.Spec, upd.Labels = want.Spec, want.Labels
		if _, err := classes.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating DeviceClass %s: %w", name, err)
		}
	}
	return nil
}

// sameCharge compares the class and count of two quota claims; the rest of
// the spec is the API server's defaulting.
func sameCharge(cur, want *resourceapi.ResourceClaim) bool {
	c, w := cur.Spec.Devices.Requests, want.Spec.Devices.Requests
	return len(c) == 1 && len(w) == 1 && c[0].Exactly != nil && w[0].Exactly != nil &&
		c[0].Exactly.DeviceClassName == w[0].Exactly.DeviceClassName && c[0].Exactly.Count == w[0].Exactly.Count
}

// sameClass compares the selectors and the presence of config of two
// DeviceClasses.
func sameClass(cur, want *resourceapi.DeviceClass) bool {
	return apiequality.Semantic.DeepEqual(cur.Spec.Selectors, want.Spec.Selectors) && len(cur.Spec.Config) == len(want.Spec.Config)
}
