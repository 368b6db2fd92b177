package controller

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/reservation"
)

// Condition types and member placements a reservation reports.
const (
	ConditionReady             = "Ready"
	ConditionDegraded          = "Degraded"
	ConditionPlacementMismatch = "PlacementMismatch"

	PlacementConverged = "Converged"
	PlacementMismatch  = "PlacementMismatch"
)

// mismatch is one member pod whose claim got a GPU outside the reservation.
type mismatch struct {
	pod    *v1.Pod
	member string
	device string
	uuid   string
}

// observeMembers reports the member pods bound to a node and not finished,
// with the memoryMiB their claims declare, and checks each allocated GPU
// against the held ones (the witness). held nil means nothing is held yet,
// in which case placement is not judged.
func (c *Controller) observeMembers(res *rotav1.GPUReservation, held []GPU) ([]rotav1.MemberStatus, []mismatch, error) {
	byName := map[string]*rotav1.MemberStatus{}
	out := make([]rotav1.MemberStatus, 0, len(res.Spec.Members))
	for _, m := range res.Spec.Members {
		out = append(out, rotav1.MemberStatus{Name: m.Name})
	}
	for i := range out {
		byName[out[i].Name] = &out[i]
	}
	inside := map[deviceKey]bool{}
	for _, g := range held {
		inside[deviceKey{g.Pool, g.Device}] = true
	}
	pods, err := c.pods.Pods(res.Namespace).List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods of %s: %w", res.Namespace, err)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var mismatches []mismatch
	placement := map[string]string{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		w, err := c.owners.WorkloadOf(pod)
		if errors.Is(err, reservation.ErrNotLoaded) {
			continue // counted once the LeaderWorkerSets are loaded
		}
		if err != nil {
			return nil, nil, err
		}
		name := reservation.MemberName(res, w)
		if name == "" {
			continue
		}
		ms := byName[name]
		ms.Pods++
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.ResourceClaimName == nil {
				continue
			}
			claim, err := c.claims.ResourceClaims(res.Namespace).Get(*s.ResourceClaimName)
			if err != nil {
				continue // gone or not yet seen: nothing to count or judge
			}
			if mem, err := reservation.ClaimMemoryMiB(claim); err == nil && mem != nil {
				ms.MemoryMiB += *mem
			}
			if claim.Status.Allocation == nil || held == nil {
				continue
			}
			for _, r := range claim.Status.Allocation.Devices.Results {
				if r.Driver != gpuv1.DriverName {
					continue
				}
				if !inside[deviceKey{r.Pool, r.Device}] {
					mismatches = append(mismatches, mismatch{pod: pod, member: name, device: r.Device, uuid: uuidOf(r.Pool, r.Device, c)})
					placement[name] = PlacementMismatch
				} else if placement[name] == "" {
					placement[name] = PlacementConverged
				}
			}
		}
	}
	for i := range out {
		out[i].Placement = placement[out[i].Name]
	}
	return out, mismatches, nil
}

// uuidOf looks a device's UUID up in the published slices, for messages.
func uuidOf(pool, device string, c *Controller) string {
	sliceList, err := byIndex[*resourceapi.ResourceSlice](c.sliceIndex, indexSliceByPool, pool)
	if err != nil {
		return ""
	}
	for _, s := range sliceList {
		if s.Spec.Driver != gpuv1.DriverName || s.Spec.Pool.Name != pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[gpuv1.AttributeUUID]; ok && d.Name == device && a.StringValue != nil {
				return *a.StringValue
			}
		}
	}
	return ""
}

// computeStatus is the status res should have; it has no side effects.
func computeStatus(res *rotav1.GPUReservation, held []GPU, headroom int64, selErr *SelectionError,
	members []rotav1.MemberStatus, mismatches []mismatch, now metav1.Time) rotav1.GPUReservationStatus {
	st := rotav1.GPUReservationStatus{
		ObservedGeneration: res.Generation,
		Members:            members,
		Conditions:         append([]metav1.Condition(nil), res.Status.Conditions...),
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: res.Generation, LastTransitionTime: now}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if selErr != nil {
		st.Phase = rotav1.ReservationPending
		set(ConditionReady, metav1.ConditionFalse, selErr.Reason, selErr.Message)
		set(ConditionDegraded, metav1.ConditionFalse, "NotHeld", "no GPUs are held")
		set(ConditionPlacementMismatch, metav1.ConditionFalse, "NotHeld", "no GPUs are held")
		return st
	}
	var unhealthy []string
	var uuids []string
	for _, g := range held {
		st.Devices = append(st.Devices, rotav1.ReservedDevice{
			UUID: g.UUID, Pool: g.Pool, Device: g.Device, Model: g.Model, MemoryMiB: g.MemoryMiB, Healthy: g.Healthy,
		})
		uuids = append(uuids, g.UUID)
		b := reservation.BudgetMiB(g.MemoryMiB, headroom)
		if st.BudgetMiBPerGPU == 0 || b < st.BudgetMiBPerGPU {
			st.BudgetMiBPerGPU = b
		}
		if !g.Healthy {
			unhealthy = append(unhealthy, fmt.Sprintf("%s (%s)", g.Device, g.UUID))
		}
	}
	st.GPUCount = int32(len(held))
	msg := fmt.Sprintf("holding %d GPU(s) on node %s: %s", len(held), res.Spec.NodeName, strings.Join(uuids, ", "))
	set(ConditionReady, metav1.ConditionTrue, "GPUsHeld", msg)
	if len(unhealthy) > 0 {
		st.Phase = rotav1.ReservationDegraded
		set(ConditionDegraded, metav1.ConditionTrue, "GPUUnhealthy",
			fmt.Sprintf("held GPU(s) tainted %s or no longer published: %s; members are not placed there until the driver clears the taint", gpuv1.UnhealthyTaintKey, strings.Join(unhealthy, ", ")))
	} else {
		st.Phase = rotav1.ReservationBound
		set(ConditionDegraded, metav1.ConditionFalse, "AllHealthy", "every held GPU is healthy")
	}
	if len(mismatches) > 0 {
		var pods []string
		for _, m := range mismatches {
			pods = append(pods, fmt.Sprintf("%s (member %s) on %s", m.pod.Name, m.member, m.device))
		}
		set(ConditionPlacementMismatch, metav1.ConditionTrue, PlacementMismatch,
			fmt.Sprintf("member pods were allocated GPUs outside the reservation: %s. %s", strings.Join(pods, "; "), fixText(res)))
	} else {
		set(ConditionPlacementMismatch, metav1.ConditionFalse, PlacementConverged, "every placed member uses held GPUs")
	}
	return st
}

// fixText tells the owner how to pin members to the held GPUs; Rota never
// moves a running pod itself.
func fixText(res *rotav1.GPUReservation) string {
	return fmt.Sprintf("Rota does not move running pods. Fix: give the member's claim template the toleration %s=%s (NoSchedule) and a selector on device.attributes[%q].uuid for the held UUIDs, then restart the member's pods.",
		gpuv1.ReservedTaintKey, gpuv1.ReservedTaintValue(res.Namespace, res.Name), gpuv1.DriverName)
}

// recordChanges emits events for what a user should see change: the phase,
// and each newly mismatched member.
func (c *Controller) recordChanges(res *rotav1.GPUReservation, st *rotav1.GPUReservationStatus, mismatches []mismatch) {
	if st.Phase != res.Status.Phase {
		ready := meta.FindStatusCondition(st.Conditions, ConditionReady)
		switch st.Phase {
		case rotav1.ReservationBound:
			c.recorder.Event(res, v1.EventTypeNormal, "Bound", ready.Message)
		case rotav1.ReservationDegraded:
			c.recorder.Event(res, v1.EventTypeWarning, "Degraded", meta.FindStatusCondition(st.Conditions, ConditionDegraded).Message)
		case rotav1.ReservationPending:
			c.recorder.Event(res, v1.EventTypeWarning, ready.Reason, ready.Message)
		}
	}
	before := map[string]string{}
	for _, m := range res.Status.Members {
		before[m.Name] = m.Placement
	}
	for _, m := range mismatches {
		if before[m.member] == PlacementMismatch {
			continue
		}
		msg := fmt.Sprintf("pod %s of member %s was allocated %s (%s), outside reservation %s/%s. %s",
			m.pod.Name, m.member, m.device, m.uuid, res.Namespace, res.Name, fixText(res))
		c.recorder.Event(res, v1.EventTypeWarning, PlacementMismatch, msg)
		c.recorder.Event(m.pod, v1.EventTypeWarning, PlacementMismatch, msg)
	}
}
