package targetguard

import (
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Schedules lists the DeploySchedules of one namespace, from a cache.
type Schedules interface {
	// InNamespace returns the schedules of namespace; an error means the
	// answer is not known (the cache has not synced), and the write is
	// refused.
	InNamespace(namespace string) ([]*rotav1.DeploySchedule, error)
}

// Guard decides the schedule controller's writes.
type Guard struct {
	schedules Schedules
}

// New returns a Guard reading schedules from s.
func New(s Schedules) *Guard { return &Guard{schedules: s} }

// workloadKinds maps the resources the controller updates to the kind and
// API group a DeploySchedule target names them by.
var workloadKinds = map[schema.GroupResource]schema.GroupKind{
	{Group: "apps", Resource: "deployments"}:                           {Group: "apps", Kind: "Deployment"},
	{Group: "apps", Resource: "statefulsets"}:                          {Group: "apps", Kind: "StatefulSet"},
	{Group: rotav1.LeaderWorkerSetGroup, Resource: "leaderworkersets"}: {Group: rotav1.LeaderWorkerSetGroup, Kind: "LeaderWorkerSet"},
}

var claimTemplates = schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaimtemplates"}

// Review answers one admission request.
func (g *Guard) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID}
	reason, err := g.refusal(req)
	switch {
	case err != nil:
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	case reason != "":
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
			Reason: metav1.StatusReasonForbidden, Message: reason}
	default:
		resp.Allowed = true
	}
	return resp
}

// refusal returns why req is refused, "" when it is allowed.
func (g *Guard) refusal(req *admissionv1.AdmissionRequest) (string, error) {
	gr := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
	if req.SubResource != "" {
		return fmt.Sprintf("rota-schedule-controller may not write %s/%s: the webhook guards whole objects only", gr, req.SubResource), nil
	}
	schedules, err := g.schedules.InNamespace(req.Namespace)
	if err != nil {
		return "", fmt.Errorf("DeploySchedules of namespace %s: %w", req.Namespace, err)
	}
	if gk, ok := workloadKinds[gr]; ok {
		if req.Operation != admissionv1.Update {
			return fmt.Sprintf("rota-schedule-controller may only update a %s, not %s it", gk.Kind, req.Operation), nil
		}
		if names(schedules, gk, req.Name) {
			return "", nil
		}
		return fmt.Sprintf("rota-schedule-controller may change only workloads a DeploySchedule names: no DeploySchedule of namespace %s has %s %s as a target",
			req.Namespace, gk.Kind, req.Name), nil
	}
	if gr == claimTemplates {
		if req.Operation != admissionv1.Create {
			return fmt.Sprintf("rota-schedule-controller may only create a ResourceClaimTemplate, not %s it", req.Operation), nil
		}
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(req.Object.Raw, &meta); err != nil {
			return fmt.Sprintf("the ResourceClaimTemplate cannot be read: %v", err), nil
		}
		reservation := meta.Metadata.Annotations[gpuv1.ReservationAnnotation]
		if reservation != "" && binds(schedules, reservation) {
			return "", nil
		}
		return fmt.Sprintf("rota-schedule-controller may create only claim templates pinned to a GPUReservation a DeploySchedule target is bound to: "+
			"no DeploySchedule of namespace %s binds a target to GPUReservation %q (annotation %s)", req.Namespace, reservation, gpuv1.ReservationAnnotation), nil
	}
	return fmt.Sprintf("rota-schedule-controller may not write %s: the webhook does not guard it", gr), nil
}

// names reports whether a schedule has a target that is the workload.
func names(schedules []*rotav1.DeploySchedule, gk schema.GroupKind, name string) bool {
	for _, ds := range schedules {
		for _, t := range ds.Spec.Targets {
			ref := t.WorkloadRef
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err == nil && gv.Group == gk.Group && ref.Kind == gk.Kind && ref.Name == name {
				return true
			}
		}
	}
	return false
}

// binds reports whether a schedule binds a target to the reservation.
func binds(schedules []*rotav1.DeploySchedule, reservation string) bool {
	for _, ds := range schedules {
		for _, t := range ds.Spec.Targets {
			if t.ReservationName == reservation {
				return true
			}
		}
	}
	return false
}
