package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// checkReservationBudgets is the preflight's VRAM check of Track H targets
// (docs/schedule.md): an acquire step bound to a time-sliced GPUReservation
// starts pods whose claims declare memoryMiB, and the scheduler's
// Reservation plugin lets them on the held GPUs only within each GPU's
// budget. Checked before anything is released, so that an outgoing
// workload is never stopped for an incoming one that cannot fit. It
// refuses what can never fit, with the numbers: one device asking more
// than a GPU's budget, or the members that stay plus the incoming
// replicas declaring more than all held GPUs' budgets together (members
// released or restarted by this transition are not counted as staying).
// Passing is necessary, not sufficient: how claims pack onto the GPUs is
// the scheduler's, and a pod that does not pack waits (StartUnschedulable).
// It returns the step to blame and the refusal ("" when it passes).
func (f preflight) checkReservationBudgets(ctx context.Context, release, acquire []planned, demand map[string][]podDemand) (planned, string, error) {
	bound := map[string][]planned{}
	for _, pl := range acquire {
		if pl.s.Phase == v1alpha1.StepPlanned && pl.t.spec.ReservationName != "" {
			bound[pl.t.spec.ReservationName] = append(bound[pl.t.spec.ReservationName], pl)
		}
	}
	names := make([]string, 0, len(bound))
	for n := range bound {
		names = append(names, n)
	}
	sort.Strings(names)
	changing := map[string]bool{}
	for _, pl := range append(append([]planned{}, release...), acquire...) {
		changing[workloadKey(f.namespace, pl.t.spec.WorkloadRef)] = true
	}
	for _, name := range names {
		steps := bound[name]
		r, err := f.demand.pins.get(ctx, name)
		if err != nil {
			return steps[0], "", err
		}
		budget := r.Status.BudgetMiBPerGPU
		if r.Spec.Mode != v1alpha1.ReservationTimeSliced || budget <= 0 {
			continue
		}
		gpus := int64(0)
		for _, d := range r.Status.Devices {
			if d.Healthy {
				gpus++
			}
		}
		member := map[string]string{}
		for _, m := range r.Spec.Members {
			member[m.Name] = workloadKey(f.namespace, m.WorkloadRef)
		}
		staying := int64(0)
		for _, m := range r.Status.Members {
			if !changing[member[m.Name]] {
				staying += m.MemoryMiB
			}
		}
		need := int64(0)
		var parts []string
		for _, pl := range steps {
			perReplica, largest, err := replicaMemory(demand[pl.t.spec.Name])
			if err != nil {
				return pl, "", err
			}
			if largest > budget {
				return pl, fmt.Sprintf("a device of target %s's claims declares %d MiB, more than one GPU's budget in GPUReservation %s (%d MiB); nothing was released",
					pl.t.spec.Name, largest, name, budget), nil
			}
			n := int64(replicasOf(pl.s)) * perReplica
			need += n
			parts = append(parts, fmt.Sprintf("%s needs %d replica(s) × %d MiB = %d MiB", pl.t.spec.Name, replicasOf(pl.s), perReplica, n))
		}
		if total := gpus * budget; staying+need > total {
			return steps[0], fmt.Sprintf("GPUReservation %s holds %d healthy GPU(s) with a budget of %d MiB each (%d MiB); the members that stay declare %d MiB and %s: %d > %d; nothing was released",
				name, gpus, budget, total, staying, strings.Join(parts, ", "), staying+need, total), nil
		}
	}
	return planned{}, "", nil
}

// replicaMemory is the memoryMiB one replica's claims declare in total
// (count x memoryMiB of each request's first tier, as the reservation
// controller counts members with rsv.ClaimMemoryMiB), and the most any one
// device declares.
func replicaMemory(demand []podDemand) (perReplica, largest int64, err error) {
	for _, d := range demand {
		for _, spec := range d.Specs {
			m, err := rsv.ClaimMemoryOf(&resourceapi.ResourceClaim{Spec: spec})
			if err != nil {
				return 0, 0, err
			}
			for _, r := range spec.Devices.Requests {
				ref, count := r.Name, int64(1)
				switch {
				case r.Exactly != nil:
					count = max(r.Exactly.Count, 1)
				case len(r.FirstAvailable) > 0:
					ref, count = r.Name+"/"+r.FirstAvailable[0].Name, max(r.FirstAvailable[0].Count, 1)
				}
				if mem := m.For(ref); mem != nil {
					perReplica += int64(d.Pods) * count * *mem
					largest = max(largest, *mem)
				}
			}
		}
	}
	return perReplica, largest, nil
}
