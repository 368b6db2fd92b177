package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/reservation"
)

// sync converges one reservation: finalizer, held GPUs and their taint
// rules, then status. Expected waits (a node that does not exist yet, GPUs
// that are busy) are status, not errors: the informers bring the
// reservation back when something changes.
func (c *Controller) sync(ctx context.Context, key string) error {
	res, err := c.current(ctx, key)
	if err != nil || res == nil {
		return err
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "gpureservation", klog.KObj(res))
	ctx = klog.NewContext(ctx, logger)

	if res.DeletionTimestamp != nil {
		return c.release(ctx, res)
	}
	if res, err = c.ensureFinalizer(ctx, res); err != nil {
		return err
	}
	held, selErr, err := c.chooseAndCharge(ctx, res)
	if err != nil {
		return err
	}
	if err := c.hold(ctx, res, held, selErr); err != nil {
		return err
	}
	return c.syncStatus(ctx, res, held, selErr)
}

// current reads the reservation of key from the informer's cache, as a copy
// the sync may change. It returns nil once the reservation is gone, after
// removing what the controller kept for it (its quota claim goes with it:
// the reservation owns it).
func (c *Controller) current(ctx context.Context, key string) (*rotav1.GPUReservation, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, fmt.Errorf("reservation key %q: %w", key, err)
	}
	obj, err := c.reservations.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.metrics.forget(namespace, name)
		gone := &rotav1.GPUReservation{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		return nil, c.unhold(ctx, gone)
	}
	if err != nil {
		return nil, fmt.Errorf("getting GPUReservation %s: %w", key, err)
	}
	got, err := reservation.FromObject(obj)
	if err != nil {
		return nil, err
	}
	return got.DeepCopy(), nil
}

// ensureFinalizer adds the finalizer that lets release remove the rules
// before the reservation goes away, and returns the reservation to go on
// with.
func (c *Controller) ensureFinalizer(ctx context.Context, res *rotav1.GPUReservation) (*rotav1.GPUReservation, error) {
	if slices.Contains(res.Finalizers, gpuv1.ReservationFinalizer) {
		return res, nil
	}
	res.Finalizers = append(res.Finalizers, gpuv1.ReservationFinalizer)
	return c.update(ctx, res)
}

// chooseAndCharge selects the GPUs to hold and charges their count to the
// namespace's quota (none while selection fails). A quota refusal turns
// into the selection error, with no GPUs held; err is for failures to retry.
func (c *Controller) chooseAndCharge(ctx context.Context, res *rotav1.GPUReservation) ([]GPU, *SelectionError, error) {
	held, selErr := c.choose(res)
	charge := int64(len(held))
	if selErr != nil {
		charge = 0
	}
	if err := c.ensureQuotaClaim(ctx, res, charge); err != nil {
		var se *SelectionError
		if !errors.As(err, &se) {
			return nil, nil, err
		}
		selErr, held = se, nil
	}
	return held, selErr, nil
}

// hold keeps one taint rule per held GPU and the members' DeviceClass; when
// selection failed, it releases both.
//
// The order keeps one invariant through a crash at any step: the class
// never selects a GPU that is not tainted. A GPU's rule is written before
// the class selects it, and the class stops selecting a GPU before its
// rule goes; otherwise a claim of the class, which needs no toleration of
// an untainted GPU, could be allocated a GPU outside the reservation and
// outside the quota.
func (c *Controller) hold(ctx context.Context, res *rotav1.GPUReservation, held []GPU, selErr *SelectionError) error {
	if selErr != nil {
		return c.unhold(ctx, res)
	}
	want, err := c.ensureRules(ctx, res, held)
	if err != nil {
		return err
	}
	if err := c.ensureClass(ctx, res, held); err != nil {
		return err
	}
	return c.deleteRules(ctx, res.Namespace, res.Name, want)
}

// unhold removes the reservation's DeviceClass, then its taint rules.
func (c *Controller) unhold(ctx context.Context, res *rotav1.GPUReservation) error {
	if err := c.ensureClass(ctx, res, nil); err != nil {
		return err
	}
	return c.deleteRules(ctx, res.Namespace, res.Name, nil)
}

// syncStatus computes the status from the held GPUs and the member pods,
// records events and metrics for what changed, and writes the status only
// when it differs.
func (c *Controller) syncStatus(ctx context.Context, res *rotav1.GPUReservation, held []GPU, selErr *SelectionError) error {
	headroom, err := reservation.ParseHeadroom(res.Spec.Headroom)
	if err != nil {
		// The CRD schema rejects such a headroom; an older object may still have one.
		selErr = &SelectionError{Reason: "InvalidHeadroom", Message: "spec.headroom: " + err.Error()}
		held = nil
	}
	members, mismatches, err := c.observeMembers(res, held)
	if err != nil {
		return err
	}
	status := computeStatus(res, held, headroom, selErr, members, mismatches, metav1.NewTime(c.clock.Now()))
	c.recordChanges(res, &status, mismatches)
	c.metrics.observe(res, &status)
	if apiequality.Semantic.DeepEqual(res.Status, status) {
		return nil
	}
	res.Status = status
	return c.updateStatus(ctx, res)
}

// choose lists the node's GPUs and selects the ones to hold.
func (c *Controller) choose(res *rotav1.GPUReservation) ([]GPU, *SelectionError) {
	if _, err := c.nodes.Get(res.Spec.NodeName); err != nil {
		if len(res.Status.Devices) == 0 || !apierrors.IsNotFound(err) {
			return nil, &SelectionError{ReasonNodeNotFound, fmt.Sprintf("spec.nodeName: node %s does not exist", res.Spec.NodeName)}
		}
	}
	// The node's slices, the claims on its GPUs and the rules on its
	// devices, from the informers' indexes.
	sliceList, claims, rules, err := c.nodeInventory(res.Spec.NodeName)
	if err != nil {
		return nil, &SelectionError{ReasonNoGPUs, err.Error()}
	}
	// Claims of members on GPUs this reservation holds do not make them busy.
	gpus := NodeGPUs(res.Spec.NodeName, sliceList, claims, rules)
	held, err := Select(res, gpus)
	var se *SelectionError
	if errors.As(err, &se) {
		return nil, se
	}
	if err != nil {
		return nil, &SelectionError{ReasonNoGPUs, err.Error()}
	}
	return held, nil
}

// ensureRules makes one DeviceTaintRule exist per held GPU and returns
// them by name; hold deletes the others once the class no longer selects
// their GPUs.
func (c *Controller) ensureRules(ctx context.Context, res *rotav1.GPUReservation, held []GPU) (map[string]*resourceapi.DeviceTaintRule, error) {
	want := map[string]*resourceapi.DeviceTaintRule{}
	for _, g := range held {
		r := taintRule(res, g.Pool, g.Device)
		want[r.Name] = r
	}
	for name, r := range want {
		cur, err := c.rules.Get(name)
		switch {
		case apierrors.IsNotFound(err):
			if _, err := c.client.ResourceV1().DeviceTaintRules().Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating DeviceTaintRule %s: %w", name, err)
			}
			klog.FromContext(ctx).V(2).Info("Holding GPU", "pool", *r.Spec.DeviceSelector.Pool, "device", *r.Spec.DeviceSelector.Device, "deviceTaintRule", name)
		case err != nil:
			return nil, fmt.Errorf("getting DeviceTaintRule %s: %w", name, err)
		case !sameRule(cur, r):
			upd := cur.DeepCopy()
			timeAdded := upd.Spec.Taint.TimeAdded
			upd.Spec, upd.Labels = r.Spec, r.Labels
			upd.Spec.Taint.TimeAdded = timeAdded
			if _, err := c.client.ResourceV1().DeviceTaintRules().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return nil, fmt.Errorf("updating DeviceTaintRule %s: %w", name, err)
			}
		}
	}
	return want, nil
}

// deleteRules removes the reservation's rules that are not in keep.
func (c *Controller) deleteRules(ctx context.Context, namespace, name string, keep map[string]*resourceapi.DeviceTaintRule) error {
	rules, err := byIndex[*resourceapi.DeviceTaintRule](c.ruleIndex, indexRuleByReservation, namespace+"/"+name)
	if err != nil {
		return fmt.Errorf("listing DeviceTaintRules of %s/%s: %w", namespace, name, err)
	}
	for _, r := range rules {
		if keep[r.Name] != nil {
			continue
		}
		if err := c.client.ResourceV1().DeviceTaintRules().Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting DeviceTaintRule %s: %w", r.Name, err)
		}
		klog.FromContext(ctx).V(2).Info("Released GPU", "deviceTaintRule", r.Name)
	}
	return nil
}

// release runs while the reservation is being deleted: phase Releasing,
// rules gone, then the finalizer.
func (c *Controller) release(ctx context.Context, res *rotav1.GPUReservation) error {
	if !slices.Contains(res.Finalizers, gpuv1.ReservationFinalizer) {
		return nil
	}
	if res.Status.Phase != rotav1.ReservationReleasing {
		c.recorder.Event(res, "Normal", "Releasing", "Reservation deleted; releasing its GPUs")
		res.Status.Phase = rotav1.ReservationReleasing
		if err := c.updateStatus(ctx, res); err != nil {
			return err
		}
		// The update returns a newer object; the next sync removes the finalizer.
		return nil
	}
	if err := c.unhold(ctx, res); err != nil {
		return err
	}
	if err := c.ensureQuotaClaim(ctx, res, 0); err != nil {
		return err
	}
	res.Finalizers = slices.DeleteFunc(res.Finalizers, func(f string) bool { return f == gpuv1.ReservationFinalizer })
	_, err := c.update(ctx, res)
	return err
}

func (c *Controller) update(ctx context.Context, res *rotav1.GPUReservation) (*rotav1.GPUReservation, error) {
	u, err := reservation.ToUnstructured(res)
	if err != nil {
		return nil, err
	}
	out, err := c.dynamic.Resource(rotav1.GPUReservationsResource).Namespace(res.Namespace).Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("updating GPUReservation %s/%s: %w", res.Namespace, res.Name, err)
	}
	return reservation.FromObject(out)
}

func (c *Controller) updateStatus(ctx context.Context, res *rotav1.GPUReservation) error {
	u, err := reservation.ToUnstructured(res)
	if err != nil {
		return err
	}
	if _, err := c.dynamic.Resource(rotav1.GPUReservationsResource).Namespace(res.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of GPUReservation %s/%s: %w", res.Namespace, res.Name, err)
	}
	return nil
}

// sameRule compares what the controller sets in a rule; the API server
// fills the taint's TimeAdded, which must not count as a difference (or
// every sync would write the rule again).
func sameRule(cur, want *resourceapi.DeviceTaintRule) bool {
	a, b := cur.Spec.Taint, want.Spec.Taint
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect &&
		apiequality.Semantic.DeepEqual(cur.Spec.DeviceSelector, want.Spec.DeviceSelector) &&
		cur.Labels[gpuv1.ReservationNamespaceLabel] == want.Labels[gpuv1.ReservationNamespaceLabel] && cur.Labels[gpuv1.ReservationNameLabel] == want.Labels[gpuv1.ReservationNameLabel]
}
