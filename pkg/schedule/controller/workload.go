package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Annotations the controller reads or writes.
const (
	// AnnotationTransitionKey on a workload is the idempotency key of the last
	// step applied to it: a replayed step that finds its key here is not applied
	// again.
	AnnotationTransitionKey = "rota.dev/transition-key"
	// AnnotationReplicasBeforeStop on a workload remembers its scale when a
	// schedule stopped it, so an unpinned Start restores it.
	AnnotationReplicasBeforeStop = "rota.dev/replicas-before-stop"
	// AnnotationAlias on a workload marks it as serving an alias even when no
	// Service selects its pods: stopping it needs allowDowntime.
	AnnotationAlias = "rota.dev/alias"
	// AnnotationApplyNow on a DeploySchedule (any new value, e.g. a timestamp)
	// asks for an immediate pass and lets a target whose transition ended
	// terminally in the current interval try again.
	AnnotationApplyNow = "rota.dev/apply-now"
)

// LeaderWorkerSet is served by the LeaderWorkerSet project's CRD.
const lwsGroupVersion = "leaderworkerset.x-k8s.io/v1"

// workload is a Deployment or StatefulSet as the controller needs it.
type workload struct {
	Kind               string
	Namespace, Name    string
	Generation         int64
	ObservedGeneration int64
	Replicas           int32 // spec
	StatusReplicas     int32
	ReadyReplicas      int32
	UpdatedReplicas    int32
	Selector           labels.Selector
	Template           *v1.PodTemplateSpec
	Annotations        map[string]string
	Deleting           bool

	deployment  *appsv1.Deployment
	statefulSet *appsv1.StatefulSet
}

// errKind is returned for a workload kind the controller does not drive.
type errKind struct{ sub, msg string }

func (e *errKind) Error() string { return e.msg }

// getWorkload reads the workload named by ref. A missing workload returns an
// error for which apierrors.IsNotFound is true.
func getWorkload(ctx context.Context, client kubernetes.Interface, namespace string, ref v1alpha1.WorkloadReference) (*workload, error) {
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
	case ref.Kind == "LeaderWorkerSet":
		if _, err := client.Discovery().ServerResourcesForGroupVersion(lwsGroupVersion); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &errKind{IneligibleKindNotInstalled, fmt.Sprintf(
					"LeaderWorkerSet %s is named but the %s API is not served by this cluster; install the LeaderWorkerSet CRD or use a Deployment/StatefulSet",
					ref.Name, lwsGroupVersion)}
			}
			return nil, fmt.Errorf("discover %s: %w", lwsGroupVersion, err)
		}
		return nil, &errKind{IneligibleUnsupportedKind, fmt.Sprintf(
			"LeaderWorkerSet %s: the API is installed, but this build scales only Deployments and StatefulSets", ref.Name)}
	default:
		return nil, &errKind{IneligibleUnsupportedKind, fmt.Sprintf("%s %s (%s) cannot be scaled by Rota; use apps/v1 Deployment or StatefulSet",
			ref.Kind, ref.Name, ref.APIVersion)}
	}
}

func fromDeployment(d *appsv1.Deployment) (*workload, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return &workload{
		Kind: "Deployment", Namespace: d.Namespace, Name: d.Name,
		Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
		Replicas:       ptr.Deref(d.Spec.Replicas, 1),
		StatusReplicas: d.Status.Replicas, ReadyReplicas: d.Status.ReadyReplicas, UpdatedReplicas: d.Status.UpdatedReplicas,
		Selector: sel, Template: &d.Spec.Template, Annotations: d.Annotations,
		Deleting: d.DeletionTimestamp != nil, deployment: d,
	}, nil
}

func fromStatefulSet(s *appsv1.StatefulSet) (*workload, error) {
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
	}
	return &workload{
		Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name,
		Generation: s.Generation, ObservedGeneration: s.Status.ObservedGeneration,
		Replicas:       ptr.Deref(s.Spec.Replicas, 1),
		StatusReplicas: s.Status.Replicas, ReadyReplicas: s.Status.ReadyReplicas, UpdatedReplicas: s.Status.UpdatedReplicas,
		Selector: sel, Template: &s.Spec.Template, Annotations: s.Annotations,
		Deleting: s.DeletionTimestamp != nil, statefulSet: s,
	}, nil
}

// change is one mutation of a workload: its new scale, annotations to set and
// optionally a new claim template for one of its pod claims (Track H).
type change struct {
	Replicas    int32
	Annotations map[string]string
	// ClaimTemplates maps a pod resource claim name to the template it must use.
	ClaimTemplates map[string]string
}

// update writes c onto the workload w was read as, with w's resourceVersion,
// so a concurrent writer makes it fail with a conflict instead of being lost.
func updateWorkload(ctx context.Context, client kubernetes.Interface, w *workload, c change) error {
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
			if t, ok := c.ClaimTemplates[rc.Name]; ok {
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
	default:
		return fmt.Errorf("workload %s/%s of kind %s cannot be updated", w.Namespace, w.Name, w.Kind)
	}
	return nil
}

// pods lists the workload's pods (terminating ones included).
func (w *workload) pods(ctx context.Context, client kubernetes.Interface) ([]v1.Pod, error) {
	list, err := client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: w.Selector.String()})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
	}
	return list.Items, nil
}
