package controller

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// aliasGuard is the alias guard of docs/schedule.md ("Executing a
// transition"), used by the preflight and by the release step.
type aliasGuard struct {
	client kubernetes.Interface
}

// check refuses to stop a target that serves an alias (a Service selects
// its pods, or it carries rota.dev/alias=true) unless the intent consents to
// downtime. If the check itself fails, the stop is refused too (fail closed).
// A scale-down that keeps pods needs no consent.
func (g aliasGuard) check(ctx context.Context, t *target, s *v1alpha1.TransitionStep) (reason, msg string) {
	if s.Action != actionStop || t.interval.AllowDowntime || t.wl == nil {
		return "", ""
	}
	alias, err := g.servesAlias(ctx, t.wl)
	if err != nil {
		return ReasonAliasBlocked, withFix(ReasonAliasBlocked, fmt.Sprintf(
			"could not check whether %s %s serves an alias, so it keeps running: %v", t.wl.Kind, t.wl.Name, err))
	}
	if alias == "" {
		return "", ""
	}
	return ReasonAliasBlocked, withFix(ReasonAliasBlocked, fmt.Sprintf(
		"%s %s serves %s and the intent (window %s) does not allow downtime, so it keeps running", t.wl.Kind, t.wl.Name, alias, t.interval.Source))
}

// servesAlias names what makes wl an alias target ("" if nothing). A
// Service the workload controls itself is part of it, not an alias: the
// LeaderWorkerSet controller makes one per set (headless, selecting every
// pod of the set by its name label) for its pods to find their leader.
func (g aliasGuard) servesAlias(ctx context.Context, wl *workload) (string, error) {
	if wl.Annotations[gpuv1.AliasAnnotation] == "true" {
		return "the alias annotation " + gpuv1.AliasAnnotation, nil
	}
	svcs, err := g.client.CoreV1().Services(wl.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list Services: %w", err)
	}
	for _, svc := range svcs.Items {
		if len(svc.Spec.Selector) == 0 || controlledBy(&svc, wl) {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for _, tmpl := range wl.Templates {
			if sel.Matches(labels.Merge(tmpl.Template.Labels, wl.InjectedLabels)) {
				return "Service " + svc.Name, nil
			}
		}
	}
	return "", nil
}

// controlledBy says whether wl is obj's controller (by UID).
func controlledBy(obj metav1.Object, wl *workload) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && wl.UID != "" && ref.UID == wl.UID
}
