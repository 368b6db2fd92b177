package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// preflight is the preflight step (docs/schedule.md, "Executing a
// transition"): read-only, before anything is released.
type preflight struct {
	client    kubernetes.Interface
	namespace string // the schedule's
	aliases   aliasGuard
	demand    demands
	out       outcomes
	// schedule and budget: the budget hook (nil: off) and the schedule's
	// name it is told.
	schedule string
	budget   BudgetChecker
}

// check checks, read-only and before anything is released, everything
// that could make the transition's acquire steps fail for good: eligibility of
// every target in the transition, the alias guard of every stop, the config
// of every acquire step, the namespace's device quota for the delta the
// acquire steps add, the VRAM budget of the time-sliced GPUReservations
// acquire steps are bound to, and the budget hook if one is configured. On failure
// every step fails and nothing is released.
func (f preflight) check(ctx context.Context, release, acquire []planned) (bool, error) {
	fail := func(bad planned, reason, msg string) (bool, error) {
		f.out.fail(bad.s, reason, msg)
		for _, pl := range append(append([]planned{}, release...), acquire...) {
			if pl.s.Phase == v1alpha1.StepPlanned {
				f.out.fail(pl.s, ReasonTransitionAborted, withFix(ReasonTransitionAborted, fmt.Sprintf(
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
		if reason, msg := f.aliases.check(ctx, pl.t, pl.s); reason != "" {
			return fail(pl, reason, msg)
		}
	}
	perReplica := map[string]v1.ResourceList{} // target -> device quota per replica
	replicaDemand := map[string][]podDemand{}  // target -> what one acquired replica asks for
	for _, pl := range append(append([]planned{}, release...), acquire...) {
		demand, err := f.demand.ofReplica(ctx, pl.t, pl.s.Group == v1alpha1.StepGroupAcquire)
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
			replicaDemand[pl.t.spec.Name] = demand
			if err := f.validateConfig(ctx, allSpecs(demand)); err != nil {
				return fail(pl, ReasonIneligible, withFix(ReasonIneligible, fmt.Sprintf("Ineligible{%s}: %v", IneligibleInvalidConfig, err)))
			}
		}
	}
	if bad, msg, err := checkQuota(ctx, f.client, f.namespace, release, acquire, perReplica); err != nil {
		return fail(bad, ReasonQuotaRefused, withFix(ReasonQuotaRefused, "could not read quota (failing closed): "+err.Error()))
	} else if msg != "" {
		return fail(bad, ReasonQuotaRefused, withFix(ReasonQuotaRefused, msg))
	}
	if bad, msg, err := f.checkReservationBudgets(ctx, release, acquire, replicaDemand); err != nil {
		return fail(bad, ReasonReservationBudgetRefused, withFix(ReasonReservationBudgetRefused, "could not check the reservation's budget (failing closed): "+err.Error()))
	} else if msg != "" {
		return fail(bad, ReasonReservationBudgetRefused, withFix(ReasonReservationBudgetRefused, msg))
	}
	if bad, msg := f.checkBudget(ctx, acquire, perReplica); msg != "" {
		return fail(bad, ReasonBudgetRefused, withFix(ReasonBudgetRefused, msg))
	}
	return true, nil
}

// validateConfig checks that every DeviceClass named exists and that opaque
// GpuConfig parameters for Rota's driver decode.
func (f preflight) validateConfig(ctx context.Context, specs []resourceapi.ResourceClaimSpec) error {
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
		if _, err := f.client.ResourceV1().DeviceClasses().Get(ctx, c, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("DeviceClass %s: %w", c, err)
		}
	}
	return nil
}
