package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// quotaSuffix is how Kubernetes names the per-DeviceClass device quota:
// "<class>.deviceclass.resource.k8s.io/devices" (v1.ResourceClaimsPerClass).
const quotaSuffix = v1.ResourceClaimsPerClass

// preflight checks, read-only and before anything is released, everything
// that could make the transition's acquire steps fail for good: eligibility of
// every target in the transition, the alias guard of every stop, the config
// of every acquire step and the namespace's device quota for the delta the
// acquire steps add. On failure every step fails and nothing is released.
func (p *pass) preflight(ctx context.Context, release, acquire []planned) (bool, error) {
	fail := func(bad planned, reason, msg string) (bool, error) {
		p.failStep(bad.t, bad.s, reason, msg)
		for _, pl := range append(append([]planned{}, release...), acquire...) {
			if pl.s.Phase == v1alpha1.StepPlanned {
				p.failStep(pl.t, pl.s, ReasonTransitionAborted, withFix(ReasonTransitionAborted, fmt.Sprintf(
					"nothing was released: target %s failed its preflight (%s)", bad.t.spec.Name, reason)))
			}
		}
		return false, nil
	}
	for _, pl := range append(append([]planned{}, release...), acquire...) {
		if pl.s.Phase == v1alpha1.StepPlanned && pl.t.ineligibleReason != "" {
			return fail(pl, pl.t.ineligibleReason, withFix(pl.t.ineligibleReason, pl.t.ineligibleMsg))
		}
	}
	for _, pl := range release {
		if reason, msg := p.aliasGuard(ctx, pl.t, pl.s); reason != "" {
			return fail(pl, reason, msg)
		}
	}
	perReplica := map[string]v1.ResourceList{} // target -> device quota per replica
	for _, pl := range append(append([]planned{}, release...), acquire...) {
		demand, err := p.replicaDemand(ctx, pl.t, pl.s.Group == v1alpha1.StepGroupAcquire)
		if err != nil {
			if pl.s.Group == v1alpha1.StepGroupAcquire {
				sub := IneligibleInvalidConfig
				var re *errReservation
				if errors.As(err, &re) {
					sub = IneligibleReservation
				}
				return fail(pl, ReasonIneligible, withFix(ReasonIneligible, fmt.Sprintf("Ineligible{%s}: %v", sub, err)))
			}
			continue // a release frees what it frees; its config does not matter
		}
		perReplica[pl.t.spec.Name] = replicaUsage(demand)
		if pl.s.Group == v1alpha1.StepGroupAcquire {
			if err := p.validateConfig(ctx, allSpecs(demand)); err != nil {
				return fail(pl, ReasonIneligible, withFix(ReasonIneligible, fmt.Sprintf("Ineligible{%s}: %v", IneligibleInvalidConfig, err)))
			}
		}
	}
	if bad, msg, err := p.checkQuota(ctx, release, acquire, perReplica); err != nil {
		return fail(bad, ReasonQuotaRefused, withFix(ReasonQuotaRefused, "could not read quota (failing closed): "+err.Error()))
	} else if msg != "" {
		return fail(bad, ReasonQuotaRefused, withFix(ReasonQuotaRefused, msg))
	}
	return true, nil
}

// delta is how many replicas a step adds (acquire) or removes (release).
func delta(pl planned) int64 {
	cur := int64(0)
	if pl.t.wl != nil {
		cur = int64(pl.t.wl.Replicas)
	}
	d := int64(replicasOf(pl.s)) - cur
	if d < 0 {
		d = -d
	}
	return d
}

// podDelta is how many pods a step adds or removes.
func podDelta(pl planned) int64 {
	if pl.t.wl == nil {
		return delta(pl)
	}
	return delta(pl) * int64(pl.t.wl.podsPerReplica())
}

// checkQuota compares, per ResourceQuota and device class, hard against the
// usage of the namespace's claims, minus what release steps free, plus what
// acquire steps add. Usage is computed from the claims themselves (as the
// quota evaluator does) so that no quota controller needs to have run.
func (p *pass) checkQuota(ctx context.Context, release, acquire []planned, perReplica map[string]v1.ResourceList) (planned, string, error) {
	if len(acquire) == 0 {
		return planned{}, "", nil
	}
	quotas, err := p.c.opts.Client.CoreV1().ResourceQuotas(p.ds.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return acquire[0], "", fmt.Errorf("list ResourceQuotas: %w", err)
	}
	var relevant []v1.ResourceQuota
	for _, q := range quotas.Items {
		for name := range q.Spec.Hard {
			if strings.HasSuffix(string(name), quotaSuffix) {
				relevant = append(relevant, q)
				break
			}
		}
	}
	if len(relevant) == 0 {
		return planned{}, "", nil
	}
	claims, err := p.c.opts.Client.ResourceV1().ResourceClaims(p.ds.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return acquire[0], "", fmt.Errorf("list ResourceClaims: %w", err)
	}
	used := v1.ResourceList{}
	for i := range claims.Items {
		if claims.Items[i].DeletionTimestamp != nil {
			continue
		}
		addScaled(used, claimUsage([]resourceapi.ResourceClaimSpec{claims.Items[i].Spec}), 1)
	}
	for _, pl := range release {
		addScaled(used, perReplica[pl.t.spec.Name], -delta(pl))
	}
	for _, pl := range acquire {
		addScaled(used, perReplica[pl.t.spec.Name], delta(pl))
		for _, q := range relevant {
			names := make([]string, 0, len(q.Spec.Hard))
			for name := range q.Spec.Hard {
				names = append(names, string(name))
			}
			sort.Strings(names)
			for _, name := range names {
				if !strings.HasSuffix(name, quotaSuffix) {
					continue
				}
				hard := q.Spec.Hard[v1.ResourceName(name)]
				u := used[v1.ResourceName(name)]
				if u.Cmp(hard) > 0 {
					return pl, fmt.Sprintf("starting %d pod(s) of target %s would use %s of %s in ResourceQuota %s (hard %s), counting what this transition releases first",
						podDelta(pl), pl.t.spec.Name, u.String(), name, q.Name, hard.String()), nil
				}
			}
		}
	}
	return planned{}, "", nil
}

// claimUsage is the device quota a set of claim specs charges, per class,
// counting the worst case of a firstAvailable list as Kubernetes does.
func claimUsage(specs []resourceapi.ResourceClaimSpec) v1.ResourceList {
	out := v1.ResourceList{}
	for _, spec := range specs {
		for _, req := range spec.Devices.Requests {
			switch {
			case req.Exactly != nil:
				add(out, req.Exactly.DeviceClassName, countOf(req.Exactly.AllocationMode, req.Exactly.Count))
			case len(req.FirstAvailable) > 0:
				worst := map[string]int64{}
				for _, sub := range req.FirstAvailable {
					if n := countOf(sub.AllocationMode, sub.Count); n > worst[sub.DeviceClassName] {
						worst[sub.DeviceClassName] = n
					}
				}
				for class, n := range worst {
					add(out, class, n)
				}
			}
		}
	}
	return out
}

func countOf(mode resourceapi.DeviceAllocationMode, count int64) int64 {
	switch mode {
	case resourceapi.DeviceAllocationModeAll:
		return resourceapi.AllocationResultsMaxSize
	case resourceapi.DeviceAllocationModeExactCount, "":
		if count == 0 {
			return 1
		}
		return count
	}
	return 0
}

func add(l v1.ResourceList, class string, n int64) {
	name := v1.ResourceName(class + quotaSuffix)
	q := l[name]
	q.Add(*resource.NewQuantity(n, resource.DecimalSI))
	l[name] = q
}

func addScaled(dst, src v1.ResourceList, factor int64) {
	for name, q := range src {
		d := dst[name]
		d.Add(*resource.NewQuantity(q.Value()*factor, resource.DecimalSI))
		dst[name] = d
	}
}

// podDemand is what one kind of pod of a replica asks for: the claim specs
// it gets from its templates, and how many such pods one replica runs.
type podDemand struct {
	Specs []resourceapi.ResourceClaimSpec
	Pods  int32
}

// replicaDemand is what one new replica of the target asks for, per pod
// template (pinned to the reservation's GPUs for Track H acquire steps).
// Claims referenced by name are shared and need no new devices.
func (p *pass) replicaDemand(ctx context.Context, t *target, pin bool) ([]podDemand, error) {
	if t.wl == nil {
		return nil, fmt.Errorf("target %s has no workload", t.spec.Name)
	}
	var uuids []string
	if pin && t.spec.ReservationName != "" {
		var err error
		if uuids, err = p.reservationUUIDs(ctx, t); err != nil {
			return nil, err
		}
	}
	var out []podDemand
	for _, pt := range t.wl.Templates {
		d := podDemand{Pods: pt.Pods}
		for _, rc := range pt.Template.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName == nil {
				continue
			}
			tmpl, err := p.c.opts.Client.ResourceV1().ResourceClaimTemplates(t.wl.Namespace).Get(ctx, *rc.ResourceClaimTemplateName, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("%spod claim %q: ResourceClaimTemplate %s does not exist", templatePrefix(t.wl, pt), rc.Name, *rc.ResourceClaimTemplateName)
				}
				return nil, fmt.Errorf("%spod claim %q: get ResourceClaimTemplate: %w", templatePrefix(t.wl, pt), rc.Name, err)
			}
			spec := tmpl.Spec.Spec
			if uuids != nil {
				spec = pinSpec(spec, uuids)
			}
			d.Specs = append(d.Specs, spec)
		}
		out = append(out, d)
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

// replicaUsage is the device quota one replica charges.
func replicaUsage(demand []podDemand) v1.ResourceList {
	out := v1.ResourceList{}
	for _, d := range demand {
		addScaled(out, claimUsage(d.Specs), int64(d.Pods))
	}
	return out
}

// allSpecs lists every claim spec of a replica once per template.
func allSpecs(demand []podDemand) []resourceapi.ResourceClaimSpec {
	var out []resourceapi.ResourceClaimSpec
	for _, d := range demand {
		out = append(out, d.Specs...)
	}
	return out
}

// validateConfig checks that every DeviceClass named exists and that opaque
// GpuConfig parameters for Rota's driver decode.
func (p *pass) validateConfig(ctx context.Context, specs []resourceapi.ResourceClaimSpec) error {
	classes := map[string]bool{}
	for _, spec := range specs {
		for _, req := range spec.Devices.Requests {
			if req.Exactly != nil {
				classes[req.Exactly.DeviceClassName] = true
			}
			for _, sub := range req.FirstAvailable {
				classes[sub.DeviceClassName] = true
			}
		}
		for i, cfg := range spec.Devices.Config {
			if cfg.Opaque == nil || cfg.Opaque.Driver != gpuv1.DriverName {
				continue
			}
			if _, err := gpuv1.Decode(cfg.Opaque.Parameters.Raw); err != nil {
				return fmt.Errorf("spec.devices.config[%d].opaque.parameters: %w", i, err)
			}
		}
	}
	names := make([]string, 0, len(classes))
	for c := range classes {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if _, err := p.c.opts.Client.ResourceV1().DeviceClasses().Get(ctx, c, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("DeviceClass %s: %w", c, err)
		}
	}
	return nil
}
