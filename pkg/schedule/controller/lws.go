package controller

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// LeaderWorkerSet (sigs.k8s.io/lws) is served by its own CRD, so the
// controller reads and writes it with the dynamic client, as unstructured
// objects: fields this build does not know survive an update untouched.
const (
	lwsGroupVersion = rotav1.LeaderWorkerSetGroupVersion
	lwsKind         = rotav1.LeaderWorkerSetKind
	lwsNameLabel    = rotav1.LeaderWorkerSetNameLabel
)

// LeaderWorkerSetsResource is the LeaderWorkerSet API the controller drives
// when the CRD is installed.
var LeaderWorkerSetsResource = rotav1.LeaderWorkerSetsResource

// lwsObject is the part of a LeaderWorkerSet the controller reads. One
// replica is a group of size pods: a leader (from leaderTemplate, or from
// workerTemplate when there is none) and size-1 workers.
type lwsObject struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Replicas             *int32 `json:"replicas,omitempty"`
		LeaderWorkerTemplate struct {
			LeaderTemplate *v1.PodTemplateSpec `json:"leaderTemplate,omitempty"`
			WorkerTemplate v1.PodTemplateSpec  `json:"workerTemplate"`
			Size           *int32              `json:"size,omitempty"`
		} `json:"leaderWorkerTemplate"`
	} `json:"spec"`
	Status struct {
		Replicas           int32  `json:"replicas,omitempty"`
		ReadyReplicas      int32  `json:"readyReplicas,omitempty"`
		UpdatedReplicas    int32  `json:"updatedReplicas,omitempty"`
		ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	} `json:"status"`
}

// Field paths of the two pod templates inside a LeaderWorkerSet.
var (
	lwsLeaderTemplatePath = []string{"spec", "leaderWorkerTemplate", "leaderTemplate"}
	lwsWorkerTemplatePath = []string{"spec", "leaderWorkerTemplate", "workerTemplate"}
)

// getLeaderWorkerSet reads a LeaderWorkerSet. When it is missing, discovery
// tells a missing object (NotFound) from a cluster without the CRD
// (Ineligible{KindNotInstalled}).
func (c clusterWorkloads) getLeaderWorkerSet(ctx context.Context, namespace, name string) (*workload, error) {
	u, err := c.dynamic.Resource(LeaderWorkerSetsResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, derr := c.client.Discovery().ServerResourcesForGroupVersion(lwsGroupVersion); derr != nil {
			if apierrors.IsNotFound(derr) {
				return nil, &errKind{IneligibleKindNotInstalled, fmt.Sprintf(
					"LeaderWorkerSet %s is named but the %s API is not served by this cluster; install the LeaderWorkerSet CRD or use a Deployment/StatefulSet",
					name, lwsGroupVersion)}
			}
			return nil, fmt.Errorf("discover %s: %w", lwsGroupVersion, derr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("get LeaderWorkerSet %s/%s: %w", namespace, name, err)
	}
	return fromLeaderWorkerSet(u)
}

func fromLeaderWorkerSet(u *unstructured.Unstructured) (*workload, error) {
	var l lwsObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &l); err != nil {
		return nil, &errKind{IneligibleInvalidConfig, fmt.Sprintf("LeaderWorkerSet %s cannot be read: %v", u.GetName(), err)}
	}
	tmpl := &l.Spec.LeaderWorkerTemplate
	size := ptr.Deref(tmpl.Size, 1)
	if size < 1 {
		return nil, &errKind{IneligibleInvalidConfig, fmt.Sprintf("LeaderWorkerSet %s: spec.leaderWorkerTemplate.size is %d, must be at least 1", l.Name, size)}
	}
	var templates []podTemplate
	if tmpl.LeaderTemplate != nil {
		templates = append(templates, podTemplate{Path: "spec.leaderWorkerTemplate.leaderTemplate", Template: tmpl.LeaderTemplate, Pods: 1})
		if size > 1 {
			templates = append(templates, podTemplate{Path: "spec.leaderWorkerTemplate.workerTemplate", Template: &tmpl.WorkerTemplate, Pods: size - 1})
		}
	} else {
		templates = append(templates, podTemplate{Path: "spec.leaderWorkerTemplate.workerTemplate", Template: &tmpl.WorkerTemplate, Pods: size})
	}
	// Older LeaderWorkerSet releases report no observedGeneration; their
	// status is taken as current, and convergence rests on the replica, pod
	// and claim checks.
	observed := ptr.Deref(l.Status.ObservedGeneration, l.Generation)
	podLabels := map[string]string{lwsNameLabel: l.Name}
	return &workload{
		Group: rotav1.LeaderWorkerSetGroup, Kind: lwsKind, Namespace: l.Namespace, Name: l.Name, UID: l.UID,
		Generation: l.Generation, ObservedGeneration: observed,
		Replicas:       ptr.Deref(l.Spec.Replicas, 1),
		StatusReplicas: l.Status.Replicas, ReadyReplicas: l.Status.ReadyReplicas, UpdatedReplicas: l.Status.UpdatedReplicas,
		Selector: labels.SelectorFromSet(podLabels), InjectedLabels: podLabels, Templates: templates,
		Annotations: l.Annotations, Deleting: l.DeletionTimestamp != nil, Controller: metav1.GetControllerOf(u), lws: u,
	}, nil
}

// updateLeaderWorkerSet writes c onto the LeaderWorkerSet as read (its
// resourceVersion included, so a concurrent writer causes a conflict):
// spec.replicas (groups), the annotations, and the claim templates of both
// pod templates.
func (c clusterWorkloads) updateLeaderWorkerSet(ctx context.Context, w *workload, ch change) error {
	u := w.lws.DeepCopy()
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	for k, v := range ch.Annotations {
		annotations[k] = v
	}
	u.SetAnnotations(annotations)
	if err := unstructured.SetNestedField(u.Object, int64(ch.Replicas), "spec", "replicas"); err != nil {
		return fmt.Errorf("set spec.replicas of LeaderWorkerSet %s/%s: %w", w.Namespace, w.Name, err)
	}
	for _, path := range [][]string{lwsLeaderTemplatePath, lwsWorkerTemplatePath} {
		if err := setClaimTemplates(u.Object, path, ch.ClaimTemplates); err != nil {
			return fmt.Errorf("LeaderWorkerSet %s/%s: %w", w.Namespace, w.Name, err)
		}
	}
	if _, err := c.dynamic.Resource(LeaderWorkerSetsResource).Namespace(w.Namespace).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update LeaderWorkerSet %s/%s: %w", w.Namespace, w.Name, err)
	}
	return nil
}

// setClaimTemplates points the pod template's resource claims at new claim
// templates (old template name -> new). A template that is absent is left so.
func setClaimTemplates(obj map[string]any, templatePath []string, templates map[string]string) error {
	if len(templates) == 0 {
		return nil
	}
	path := append(append([]string{}, templatePath...), "spec", "resourceClaims")
	claims, found, err := unstructured.NestedSlice(obj, path...)
	if err != nil {
		return fmt.Errorf("read %v: %w", path, err)
	}
	if !found {
		return nil
	}
	for i, rc := range claims {
		m, ok := rc.(map[string]any)
		if !ok {
			continue
		}
		if old, ok := m["resourceClaimTemplateName"].(string); ok {
			if to, ok := templates[old]; ok {
				m["resourceClaimTemplateName"] = to
				claims[i] = m
			}
		}
	}
	if err := unstructured.SetNestedSlice(obj, claims, path...); err != nil {
		return fmt.Errorf("write %v: %w", path, err)
	}
	return nil
}
