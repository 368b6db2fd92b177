package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// eligibility is the eligibility step (docs/schedule.md, "A pass", step 3):
// it reads a target's workload and says whether it may be driven this pass.
// It is re-run every pass.
type eligibility struct {
	client    kubernetes.Interface
	workloads workloadAccess
}

// eligible is what the eligibility step found about one target.
type eligible struct {
	// wl is the workload as read; nil when it could not be read.
	wl *workload
	// observed is the target's status.observed.
	observed *v1alpha1.ObservedWorkload
	// reason and msg say why the target may not be driven ("" if it may).
	reason, msg string
}

// check reads the workload ref of namespace and checks it against the
// target's current interval.
func (e eligibility) check(ctx context.Context, namespace string, ref v1alpha1.WorkloadReference, interval schedule.Interval) (eligible, error) {
	wl, err := e.workloads.get(ctx, namespace, ref)
	var kindErr *errKind
	switch {
	case errors.As(err, &kindErr):
		return eligible{}.ineligible(kindErr.sub, kindErr.msg), nil
	case apierrors.IsNotFound(err):
		return eligible{}.ineligible(IneligibleNotFound, fmt.Sprintf("%s %s/%s does not exist; create it or fix spec.targets[].workloadRef",
			ref.Kind, namespace, ref.Name)), nil
	case err != nil:
		return eligible{}, err
	}
	res := eligible{wl: wl, observed: &v1alpha1.ObservedWorkload{Exists: true, Replicas: wl.Replicas, ReadyReplicas: wl.ReadyReplicas}}
	if wl.Deleting {
		return res.ineligible(IneligibleDeleting, fmt.Sprintf("%s %s is being deleted", wl.Kind, wl.Name)), nil
	}
	// Another controller sets this workload's scale (an operator, a rollout
	// controller): it would undo every change, and Rota's release or start
	// would never converge.
	if c := wl.Controller; c != nil {
		return res.ineligible(IneligibleManagedByController, fmt.Sprintf(
			"%s %s is controlled by %s %s, which would undo the schedule's changes; schedule the %s instead, or remove its controller reference",
			wl.Kind, wl.Name, c.Kind, c.Name, c.Kind)), nil
	}
	// A workload whose last rollout failed would not become ready at a
	// higher scale either; starting it in a transition would stop the
	// outgoing targets for nothing. Checked only when the intent asks for
	// more of it: a running workload left at its scale is not touched.
	if wl.Failed != "" && interval.State == v1alpha1.StateRunning && (wl.Replicas == 0 || interval.Replicas > wl.Replicas) {
		return res.ineligible(IneligibleWorkloadFailed, fmt.Sprintf(
			"%s %s's last rollout failed (%s); fix the rollout (image, probes, resources) before the schedule starts more of it",
			wl.Kind, wl.Name, wl.Failed)), nil
	}
	if interval.Replicas != 0 {
		hpa, err := e.hpaFor(ctx, wl)
		if err != nil {
			return res.ineligible(IneligibleUnsupportedScaleForMode, "could not check for a HorizontalPodAutoscaler (failing closed): "+err.Error()), nil
		}
		if hpa != "" {
			return res.ineligible(IneligibleUnsupportedScaleForMode, fmt.Sprintf(
				"%s %s is scaled by HorizontalPodAutoscaler %s, and the intent pins replicas=%d; remove replicas from the window state or the HPA",
				wl.Kind, wl.Name, hpa, interval.Replicas)), nil
		}
	}
	return res, nil
}

// ineligible returns r marked Ineligible{sub}.
func (r eligible) ineligible(sub, msg string) eligible {
	r.reason = ReasonIneligible
	r.msg = fmt.Sprintf("Ineligible{%s}: %s", sub, msg)
	if r.wl == nil {
		r.observed = &v1alpha1.ObservedWorkload{Exists: false}
	}
	return r
}

// hpaFor returns the name of a HorizontalPodAutoscaler that scales wl, if any.
func (e eligibility) hpaFor(ctx context.Context, wl *workload) (string, error) {
	list, err := e.client.AutoscalingV2().HorizontalPodAutoscalers(wl.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list HorizontalPodAutoscalers: %w", err)
	}
	for _, h := range list.Items {
		ref := h.Spec.ScaleTargetRef
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		if ref.Kind == wl.Kind && ref.Name == wl.Name && (gv.Group == wl.Group || ref.APIVersion == "") {
			return h.Name, nil
		}
	}
	return "", nil
}
