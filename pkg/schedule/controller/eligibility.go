package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// checkEligibility reads the target's workload and records, on t, why it may
// not be driven this pass (docs/schedule.md, "A pass", steps 2 and 3). It is re-run every pass.
func (p *pass) checkEligibility(ctx context.Context, t *target) error {
	owner, err := p.c.ownerOf(ctx, p.ds.Namespace, t.spec.WorkloadRef)
	if err != nil {
		return err
	}
	if owner != nil && owner.UID != p.ds.UID {
		t.ineligibleReason = ReasonTargetOwned
		t.ineligibleMsg = fmt.Sprintf("%s %s is already driven by DeploySchedule %s (created first); this schedule leaves it alone",
			t.spec.WorkloadRef.Kind, t.spec.WorkloadRef.Name, owner.Name)
		return nil
	}
	wl, err := p.c.getWorkload(ctx, p.ds.Namespace, t.spec.WorkloadRef)
	var kindErr *errKind
	switch {
	case errors.As(err, &kindErr):
		return p.ineligible(t, kindErr.sub, kindErr.msg)
	case apierrors.IsNotFound(err):
		return p.ineligible(t, IneligibleNotFound, fmt.Sprintf("%s %s/%s does not exist; create it or fix spec.targets[].workloadRef",
			t.spec.WorkloadRef.Kind, p.ds.Namespace, t.spec.WorkloadRef.Name))
	case err != nil:
		return err
	}
	t.wl = wl
	t.status.Observed = &v1alpha1.ObservedWorkload{Exists: true, Replicas: wl.Replicas, ReadyReplicas: wl.ReadyReplicas}
	if wl.Deleting {
		return p.ineligible(t, IneligibleDeleting, fmt.Sprintf("%s %s is being deleted", wl.Kind, wl.Name))
	}
	if t.interval.Replicas != 0 {
		hpa, err := p.hpaFor(ctx, wl)
		if err != nil {
			return p.ineligible(t, IneligibleUnsupportedScaleForMode, "could not check for a HorizontalPodAutoscaler (failing closed): "+err.Error())
		}
		if hpa != "" {
			return p.ineligible(t, IneligibleUnsupportedScaleForMode, fmt.Sprintf(
				"%s %s is scaled by HorizontalPodAutoscaler %s, and the intent pins replicas=%d; remove replicas from the window state or the HPA",
				wl.Kind, wl.Name, hpa, t.interval.Replicas))
		}
	}
	return nil
}

func (p *pass) ineligible(t *target, sub, msg string) error {
	t.ineligibleReason = ReasonIneligible
	t.ineligibleMsg = fmt.Sprintf("Ineligible{%s}: %s", sub, msg)
	if t.wl == nil {
		t.status.Observed = &v1alpha1.ObservedWorkload{Exists: false}
	}
	return nil
}

// hpaFor returns the name of a HorizontalPodAutoscaler that scales wl, if any.
func (p *pass) hpaFor(ctx context.Context, wl *workload) (string, error) {
	list, err := p.c.opts.Client.AutoscalingV2().HorizontalPodAutoscalers(wl.Namespace).List(ctx, metav1.ListOptions{})
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

// ownerOf returns the schedule that owns a workload: among the schedules of the
// namespace that name it, the one created first (then by name). Ownership
// needs no write, so Observe mode mutates nothing and the first keeps it.
func (c *Controller) ownerOf(ctx context.Context, namespace string, ref v1alpha1.WorkloadReference) (*v1alpha1.DeploySchedule, error) {
	candidates, err := c.schedulesNaming(ctx, namespace, ref)
	if err != nil {
		return nil, err
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return candidates[0], nil
}

// schedulesNaming lists the schedules of a namespace that name the workload,
// from the informer's index when it runs, else from the API.
func (c *Controller) schedulesNaming(ctx context.Context, namespace string, ref v1alpha1.WorkloadReference) ([]*v1alpha1.DeploySchedule, error) {
	key := workloadKey(namespace, ref)
	if c.informer != nil && c.informer.HasSynced() {
		objs, err := c.informer.GetIndexer().ByIndex(workloadIndex, key)
		if err != nil {
			return nil, fmt.Errorf("schedule index: %w", err)
		}
		out := make([]*v1alpha1.DeploySchedule, 0, len(objs))
		for _, o := range objs {
			if ds, ok := o.(*v1alpha1.DeploySchedule); ok {
				out = append(out, ds)
			}
		}
		return out, nil
	}
	list, err := c.schedules.list(ctx, namespace, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*v1alpha1.DeploySchedule
	for i := range list.Items {
		for _, t := range list.Items[i].Spec.Targets {
			if workloadKey(namespace, t.WorkloadRef) == key {
				out = append(out, &list.Items[i])
				break
			}
		}
	}
	return out, nil
}
