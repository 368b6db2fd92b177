package targetguard

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

type fixedSchedules map[string][]*rotav1.DeploySchedule

func (f fixedSchedules) InNamespace(ns string) ([]*rotav1.DeploySchedule, error) { return f[ns], nil }

type unsynced struct{}

func (unsynced) InNamespace(string) ([]*rotav1.DeploySchedule, error) { return nil, errNotSynced }

func schedule(ns string, targets ...rotav1.ScheduleTarget) *rotav1.DeploySchedule {
	return &rotav1.DeploySchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "week"}, Spec: rotav1.DeployScheduleSpec{Targets: targets}}
}

func target(apiVersion, kind, name, reservation string) rotav1.ScheduleTarget {
	return rotav1.ScheduleTarget{Name: name, WorkloadRef: rotav1.WorkloadReference{APIVersion: apiVersion, Kind: kind, Name: name}, ReservationName: reservation}
}

func request(group, resource, sub string, op admissionv1.Operation, ns, name string, obj runtime.Object) *admissionv1.AdmissionRequest {
	req := &admissionv1.AdmissionRequest{
		UID: "1", Operation: op, Namespace: ns, Name: name, SubResource: sub,
		Resource: metav1.GroupVersionResource{Group: group, Version: "v1", Resource: resource},
	}
	if obj != nil {
		raw, _ := json.Marshal(obj)
		req.Object.Raw = raw
	}
	return req
}

func pinned(reservation string) runtime.Object {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "gpu-pin-0123456789",
		Labels: map[string]string{gpuv1.PinnedFromLabel: "gpu"}, Annotations: map[string]string{gpuv1.ReservationAnnotation: reservation}}}
}

// TestGuardAllowsOnlyNamedTargets: a write of the controller's token goes
// through only when a DeploySchedule of the same namespace names the
// workload (kind, API group and name) or binds a target to the reservation
// a new claim template is pinned to.
func TestGuardAllowsOnlyNamedTargets(t *testing.T) {
	g := New(fixedSchedules{
		"team-a": {schedule("team-a",
			target("apps/v1", "Deployment", "model", "nightly"),
			target("apps/v1", "StatefulSet", "db", ""),
			target(rotav1.LeaderWorkerSetGroupVersion, "LeaderWorkerSet", "llm", ""))},
		"team-b": {schedule("team-b", target("apps/v1", "Deployment", "other", ""))},
	})
	for _, tc := range []struct {
		name    string
		req     *admissionv1.AdmissionRequest
		allowed bool
		says    string
	}{
		{"named Deployment", request("apps", "deployments", "", admissionv1.Update, "team-a", "model", nil), true, ""},
		{"named StatefulSet", request("apps", "statefulsets", "", admissionv1.Update, "team-a", "db", nil), true, ""},
		{"named LeaderWorkerSet", request(rotav1.LeaderWorkerSetGroup, "leaderworkersets", "", admissionv1.Update, "team-a", "llm", nil), true, ""},
		{"pinned to a bound reservation", request("resource.k8s.io", "resourceclaimtemplates", "", admissionv1.Create, "team-a", "gpu-pin-0123456789", pinned("nightly")), true, ""},
		{"Deployment no schedule names", request("apps", "deployments", "", admissionv1.Update, "team-a", "payroll", nil), false,
			"no DeploySchedule of namespace team-a has Deployment payroll as a target"},
		{"named in another namespace", request("apps", "deployments", "", admissionv1.Update, "team-a", "other", nil), false, "Deployment other"},
		{"same name, other kind", request("apps", "statefulsets", "", admissionv1.Update, "team-a", "model", nil), false, "StatefulSet model"},
		{"namespace without schedules", request("apps", "deployments", "", admissionv1.Update, "kube-system", "model", nil), false, "namespace kube-system"},
		{"delete a named workload", request("apps", "deployments", "", admissionv1.Delete, "team-a", "model", nil), false, "may only update"},
		{"scale subresource", request("apps", "deployments", "scale", admissionv1.Update, "team-a", "payroll", nil), false, "whole objects only"},
		{"pinned to an unbound reservation", request("resource.k8s.io", "resourceclaimtemplates", "", admissionv1.Create, "team-a", "gpu-pin-0123456789", pinned("other")), false,
			`no DeploySchedule of namespace team-a binds a target to GPUReservation "other"`},
		{"claim template without reservation", request("resource.k8s.io", "resourceclaimtemplates", "", admissionv1.Create, "team-a", "gpu-pin-0123456789", pinned("")), false, `GPUReservation ""`},
		{"a resource the webhook does not guard", request("", "pods", "", admissionv1.Update, "team-a", "model", nil), false, "does not guard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.Review(tc.req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if resp.UID != tc.req.UID {
				t.Errorf("response UID %q, want the request's %q", resp.UID, tc.req.UID)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, tc.says) {
				t.Errorf("message %q does not say %q", resp.Result.Message, tc.says)
			}
		})
	}
}

// TestGuardRefusesBeforeItsCacheSynced: a replica that has not read the
// DeploySchedules yet cannot know, and refuses.
func TestGuardRefusesBeforeItsCacheSynced(t *testing.T) {
	resp := New(unsynced{}).Review(request("apps", "deployments", "", admissionv1.Update, "team-a", "model", nil))
	if resp.Allowed || resp.Result.Code != 500 || !strings.Contains(resp.Result.Message, errNotSynced.Error()) {
		t.Fatalf("response %+v, want a refusal saying the cache has not synced", resp.Result)
	}
}
