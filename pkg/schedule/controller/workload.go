package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// workload is a Deployment, StatefulSet or LeaderWorkerSet as the controller
// needs it. Replica counts are the workload's own unit: pods for a Deployment
// or StatefulSet, leader-worker groups for a LeaderWorkerSet.
type workload struct {
	Group              string // API group: "apps" or lwsGroup
	Kind               string
	Namespace, Name    string
	UID                types.UID
	Generation         int64
	ObservedGeneration int64
	Replicas           int32 // spec
	StatusReplicas     int32
	ReadyReplicas      int32
	UpdatedReplicas    int32
	Selector           labels.Selector
	// Templates are the pod templates of one replica, each with how many of
	// the replica's pods it makes.
	Templates []podTemplate
	// InjectedLabels are labels the workload's controller adds to every pod
	// on top of the templates' (a Service may select them).
	InjectedLabels map[string]string
	Annotations    map[string]string
	Deleting       bool
	// Controller is the workload's controller reference, if another
	// object controls it.
	Controller *metav1.OwnerReference
	// Failed says why the workload's last rollout failed ("" when it did
	// not, or its kind does not say): a Deployment whose Progressing
	// condition is False with ProgressDeadlineExceeded for its current
	// generation.
	Failed string

	deployment  *appsv1.Deployment
	statefulSet *appsv1.StatefulSet
	lws         *unstructured.Unstructured
}

// podTemplate is one pod template of a workload and the number of pods per
// replica made from it.
type podTemplate struct {
	// Path is the template's field path in the workload, for messages.
	Path     string
	Template *v1.PodTemplateSpec
	Pods     int32
}

// podsPerReplica is how many pods one replica of w runs.
func (w *workload) podsPerReplica() int32 {
	n := int32(0)
	for _, t := range w.Templates {
		n += t.Pods
	}
	return n
}

// claimRefs are the pod resource claims of all of w's templates that are
// generated from a ResourceClaimTemplate.
func (w *workload) claimRefs() []v1.PodResourceClaim {
	var out []v1.PodResourceClaim
	for _, t := range w.Templates {
		for _, rc := range t.Template.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName != nil {
				out = append(out, rc)
			}
		}
	}
	return out
}

// workloadAccess reads and writes the workloads schedules drive —
// Deployments, StatefulSets and LeaderWorkerSets — in one shape: scale, pod
// templates and pods. Every step reaches workloads through it.
type workloadAccess interface {
	// get reads the workload named by ref. A missing workload returns an
	// error for which apierrors.IsNotFound is true; a kind Rota does not
	// drive returns an *errKind.
	get(ctx context.Context, namespace string, ref v1alpha1.WorkloadReference) (*workload, error)
	// update writes ch onto the workload as w was read (with its
	// resourceVersion, so a concurrent writer makes it fail with a conflict
	// instead of being lost).
	update(ctx context.Context, w *workload, ch change) error
	// pods lists the workload's pods (terminating ones included).
	pods(ctx context.Context, w *workload) ([]v1.Pod, error)
}

// clusterWorkloads is workloadAccess against the API server: typed clients
// for apps/v1, the dynamic client for LeaderWorkerSets (lws.go).
type clusterWorkloads struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
}

// errKind is returned for a workload kind the controller does not drive.
type errKind struct{ sub, msg string }

func (e *errKind) Error() string { return e.msg }

// get implements workloadAccess.
func (c clusterWorkloads) get(ctx context.Context, namespace string, ref v1alpha1.WorkloadReference) (*workload, error) {
	client := c.client
	switch {
	case ref.Kind == "Deployment" && ref.APIVersion == "apps/v1":
		d, err := client.AppsV1().Deployments(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get Deployment %s/%s: %w", namespace, ref.Name, err)
		}
		return fromDeployment(d)
	case ref.Kind == "StatefulSet" && ref.APIVersion == "apps/v1":
		s, err := client.AppsV1().StatefulSets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get StatefulSet %s/%s: %w", namespace, ref.Name, err)
		}
		return fromStatefulSet(s)
	case ref.Kind == lwsKind && ref.APIVersion == lwsGroupVersion:
		return c.getLeaderWorkerSet(ctx, namespace, ref.Name)
	default:
		return nil, &errKind{IneligibleUnsupportedKind, fmt.Sprintf("%s %s (%s) cannot be scaled by Rota; use apps/v1 Deployment or StatefulSet, or %s LeaderWorkerSet",
			ref.Kind, ref.Name, ref.APIVersion, lwsGroupVersion)}
	}
}

func fromDeployment(d *appsv1.Deployment) (*workload, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return &workload{
		Group: appsv1.GroupName, Kind: "Deployment", Namespace: d.Namespace, Name: d.Name, UID: d.UID,
		Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
		Replicas:       ptr.Deref(d.Spec.Replicas, 1),
		StatusReplicas: d.Status.Replicas, ReadyReplicas: d.Status.ReadyReplicas, UpdatedReplicas: d.Status.UpdatedReplicas,
		Selector: sel, Templates: []podTemplate{{Path: "spec.template", Template: &d.Spec.Template, Pods: 1}},
		Annotations: d.Annotations, Deleting: d.DeletionTimestamp != nil, Controller: metav1.GetControllerOf(d), deployment: d,
		Failed: failedRollout(d),
	}, nil
}

// failedRollout is the Deployment controller's verdict on the current
// generation's rollout when it gave up (ProgressDeadlineExceeded), else "".
func failedRollout(d *appsv1.Deployment) string {
	if d.Status.ObservedGeneration != d.Generation {
		return ""
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == v1.ConditionFalse && c.Reason == deploymentProgressDeadlineExceeded {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// deploymentProgressDeadlineExceeded is the Progressing condition's reason
// when a rollout passed spec.progressDeadlineSeconds (the Deployment
// controller's constant, which k8s.io/api does not export).
const deploymentProgressDeadlineExceeded = "ProgressDeadlineExceeded"

func fromStatefulSet(s *appsv1.StatefulSet) (*workload, error) {
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
	}
	return &workload{
		Group: appsv1.GroupName, Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name, UID: s.UID,
		Generation: s.Generation, ObservedGeneration: s.Status.ObservedGeneration,
		Replicas:       ptr.Deref(s.Spec.Replicas, 1),
		StatusReplicas: s.Status.Replicas, ReadyReplicas: s.Status.ReadyReplicas, UpdatedReplicas: s.Status.UpdatedReplicas,
		Selector: sel, Templates: []podTemplate{{Path: "spec.template", Template: &s.Spec.Template, Pods: 1}},
		Annotations: s.Annotations, Deleting: s.DeletionTimestamp != nil, Controller: metav1.GetControllerOf(s), statefulSet: s,
	}, nil
}

// change is one mutation of a workload: its new scale, annotations to set and
// optionally a new claim template for one of its pod claims (Track H).
type change struct {
	Replicas    int32
	Annotations map[string]string
	// ClaimTemplates maps the claim template a pod resource claim uses now to
	// the one it must use.
	ClaimTemplates map[string]string
}

// update implements workloadAccess.
func (cw clusterWorkloads) update(ctx context.Context, w *workload, c change) error {
	client := cw.client
	apply := func(meta *metav1.ObjectMeta, replicas **int32, tmpl *v1.PodTemplateSpec) {
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		for k, v := range c.Annotations {
			meta.Annotations[k] = v
		}
		*replicas = ptr.To(c.Replicas)
		for i := range tmpl.Spec.ResourceClaims {
			rc := &tmpl.Spec.ResourceClaims[i]
			if rc.ResourceClaimTemplateName == nil {
				continue
			}
			if t, ok := c.ClaimTemplates[*rc.ResourceClaimTemplateName]; ok {
				rc.ResourceClaimTemplateName = ptr.To(t)
			}
		}
	}
	switch {
	case w.deployment != nil:
		d := w.deployment.DeepCopy()
		apply(&d.ObjectMeta, &d.Spec.Replicas, &d.Spec.Template)
		if _, err := client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update Deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
	case w.statefulSet != nil:
		s := w.statefulSet.DeepCopy()
		apply(&s.ObjectMeta, &s.Spec.Replicas, &s.Spec.Template)
		if _, err := client.AppsV1().StatefulSets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
		}
	case w.lws != nil:
		return cw.updateLeaderWorkerSet(ctx, w, c)
	default:
		return fmt.Errorf("workload %s/%s of kind %s cannot be updated", w.Namespace, w.Name, w.Kind)
	}
	return nil
}

// pods implements workloadAccess.
func (c clusterWorkloads) pods(ctx context.Context, w *workload) ([]v1.Pod, error) {
	list, err := c.client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: w.Selector.String()})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
	}
	return list.Items, nil
}
