package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/reservation"
)

// errReservation says a target's GPUReservation cannot be used yet.
type errReservation struct{ err error }

func (e *errReservation) Error() string { return e.err.Error() }
func (e *errReservation) Unwrap() error { return e.err }

// reservations reads the GPUReservations targets of a schedule are bound to
// (docs/schedule.md, "Track H") and pins claim templates to their GPUs. The
// demand reader and the submitter use it.
type reservations struct {
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	namespace string // the schedule's
}

// uuids reads (only reads) the GPUReservation name and returns the UUIDs it
// holds, sorted.
func (rs reservations) uuids(ctx context.Context, name string) ([]string, error) {
	r, err := rs.get(ctx, name)
	if err != nil {
		return nil, &errReservation{err: err}
	}
	var uuids []string
	for _, d := range r.Status.Devices {
		if d.UUID != "" {
			uuids = append(uuids, d.UUID)
		}
	}
	if len(uuids) == 0 {
		return nil, &errReservation{err: fmt.Errorf("reservation %s holds no GPUs yet (phase %q)", r.Name, r.Status.Phase)}
	}
	sort.Strings(uuids)
	return uuids, nil
}

// pinSpec returns spec with every device request (and firstAvailable
// subrequest) restricted to the given GPU UUIDs by a CEL selector and
// tolerating the taint the reservation namespace/name holds them with: the
// selector alone would leave only tainted GPUs, which the allocator never
// gives to a claim without the toleration.
func pinSpec(spec resourceapi.ResourceClaimSpec, namespace, name string, uuids []string) resourceapi.ResourceClaimSpec {
	out := *spec.DeepCopy()
	tol := reservation.Toleration(namespace, name)
	quoted := make([]string, len(uuids))
	for i, u := range uuids {
		quoted[i] = strconv.Quote(u)
	}
	sel := resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(
		"device.driver == %q && device.attributes[%q].uuid in [%s]", gpuv1.DriverName, gpuv1.DriverName, strings.Join(quoted, ", "))}}
	for i := range out.Devices.Requests {
		r := &out.Devices.Requests[i]
		if r.Exactly != nil {
			r.Exactly.Selectors = append(r.Exactly.Selectors, sel)
			r.Exactly.Tolerations = withToleration(r.Exactly.Tolerations, tol)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			sub.Selectors = append(sub.Selectors, sel)
			sub.Tolerations = withToleration(sub.Tolerations, tol)
		}
	}
	return out
}

// withToleration appends tol unless tols already holds it.
func withToleration(tols []resourceapi.DeviceToleration, tol resourceapi.DeviceToleration) []resourceapi.DeviceToleration {
	for _, t := range tols {
		if t.Key == tol.Key && t.Operator == tol.Operator && t.Value == tol.Value && t.Effect == tol.Effect {
			return tols
		}
	}
	return append(tols, tol)
}

// get reads a GPUReservation (status only is used).
func (rs reservations) get(ctx context.Context, name string) (*v1alpha1.GPUReservation, error) {
	u, err := rs.dynamic.Resource(v1alpha1.GPUReservationsResource).Namespace(rs.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get GPUReservation %s/%s: %w", rs.namespace, name, err)
	}
	var r v1alpha1.GPUReservation
	return &r, fromUnstructured(u, &r)
}

// pin makes sure a pinned copy of each of the workload's claim
// templates exists (templates are immutable, so the copy has a name derived
// from the original and the UUIDs) and returns current template name ->
// pinned template name, over every pod template of the workload, for the
// workload update. Creating the copy is idempotent.
func (rs reservations) pin(ctx context.Context, name string, wl *workload) (map[string]string, error) {
	uuids, err := rs.uuids(ctx, name)
	if err != nil {
		return nil, err
	}
	// The hash covers the reservation as well as its GPUs: the copy carries
	// the reservation's toleration.
	sum := sha256.Sum256([]byte(gpuv1.ReservedTaintValue(rs.namespace, name) + ":" + strings.Join(uuids, ",")))
	suffix := "-pin-" + hex.EncodeToString(sum[:])[:10]
	client := rs.client.ResourceV1().ResourceClaimTemplates(wl.Namespace)
	out := map[string]string{}
	for _, rc := range wl.claimRefs() {
		if _, done := out[*rc.ResourceClaimTemplateName]; done {
			continue
		}
		tmpl, err := client.Get(ctx, *rc.ResourceClaimTemplateName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get ResourceClaimTemplate %s: %w", *rc.ResourceClaimTemplateName, err)
		}
		base := tmpl
		if orig := tmpl.Labels[gpuv1.PinnedFromLabel]; orig != "" {
			if base, err = client.Get(ctx, orig, metav1.GetOptions{}); err != nil {
				return nil, fmt.Errorf("get ResourceClaimTemplate %s: %w", orig, err)
			}
		}
		pinnedName := truncateName(base.Name, suffix)
		out[tmpl.Name] = pinnedName
		if pinnedName == tmpl.Name {
			continue
		}
		pinned := &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{
				Name: pinnedName, Namespace: wl.Namespace,
				Labels:      map[string]string{gpuv1.PinnedFromLabel: base.Name},
				Annotations: map[string]string{gpuv1.ReservationAnnotation: name},
			},
			Spec: resourceapi.ResourceClaimTemplateSpec{ObjectMeta: base.Spec.ObjectMeta, Spec: pinSpec(base.Spec.Spec, rs.namespace, name, uuids)},
		}
		if _, err := client.Create(ctx, pinned, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create pinned ResourceClaimTemplate %s: %w", pinnedName, err)
		}
	}
	return out, nil
}

func truncateName(base, suffix string) string {
	if len(base)+len(suffix) > 253 {
		base = base[:253-len(suffix)]
	}
	return base + suffix
}
