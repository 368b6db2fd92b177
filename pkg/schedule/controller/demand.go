package controller

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// podDemand is what one kind of pod of a replica asks for: the claim specs
// it gets from its templates, and how many such pods one replica runs.
type podDemand struct {
	Specs []resourceapi.ResourceClaimSpec
	Pods  int32
}

// demands reads what a target's replicas ask for, for the preflight's quota
// and config checks and the acquire step's capacity preview.
type demands struct {
	client kubernetes.Interface
	pins   reservations
}

// ofReplica is what one new replica of the target asks for, per pod
// template (pinned to the reservation's GPUs for Track H acquire steps).
// Claims referenced by name are shared and need no new devices.
func (d demands) ofReplica(ctx context.Context, t *target, pin bool) ([]podDemand, error) {
	if t.wl == nil {
		return nil, fmt.Errorf("target %s has no workload", t.spec.Name)
	}
	var uuids []string
	if pin && t.spec.ReservationName != "" {
		var err error
		if uuids, err = d.pins.uuids(ctx, t.spec.ReservationName); err != nil {
			return nil, err
		}
	}
	var out []podDemand
	for _, pt := range t.wl.Templates {
		pd := podDemand{Pods: pt.Pods}
		for _, rc := range pt.Template.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName == nil {
				continue
			}
			tmpl, err := d.client.ResourceV1().ResourceClaimTemplates(t.wl.Namespace).Get(ctx, *rc.ResourceClaimTemplateName, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("%spod claim %q: ResourceClaimTemplate %s does not exist", templatePrefix(t.wl, pt), rc.Name, *rc.ResourceClaimTemplateName)
				}
				return nil, fmt.Errorf("%spod claim %q: get ResourceClaimTemplate: %w", templatePrefix(t.wl, pt), rc.Name, err)
			}
			spec := tmpl.Spec.Spec
			if uuids != nil {
				spec = pinSpec(spec, d.pins.namespace, t.spec.ReservationName, uuids)
			}
			pd.Specs = append(pd.Specs, spec)
		}
		out = append(out, pd)
	}
	return out, nil
}

// templatePrefix names the pod template in messages about a workload with
// more than one ("spec.leaderWorkerTemplate.workerTemplate: ").
func templatePrefix(wl *workload, pt podTemplate) string {
	if len(wl.Templates) < 2 {
		return ""
	}
	return pt.Path + ": "
}

// allSpecs lists every claim spec of a replica once per template.
func allSpecs(demand []podDemand) []resourceapi.ResourceClaimSpec {
	var out []resourceapi.ResourceClaimSpec
	for _, d := range demand {
		out = append(out, d.Specs...)
	}
	return out
}
