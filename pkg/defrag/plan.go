package defrag

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rota-dev/rota/pkg/advisor"
)

// Plan is what defrag would do, in order.
type Plan struct {
	// Units are the waiting pods and gangs, in the order they are planned.
	Units []advisor.PlannedUnit `json:"units"`
	// Evictions are the pods to evict, in order: each move step's pods,
	// unit after unit.
	Evictions []Eviction `json:"evictions"`
	// Skipped are waiting pods whose unit could not be read (a claim not
	// created yet), with the error.
	Skipped []string `json:"skipped,omitempty"`
}

// Eviction is one pod a plan evicts, as it was when the plan was made.
type Eviction struct {
	// Unit is the waiting unit the eviction admits.
	Unit string `json:"unit"`
	// Workload is the running workload the step disturbs (its pods go
	// together); Action is the advisor's "move" (its controller's new pod
	// should find room elsewhere) or "evict" (no room, or pinned).
	Workload string    `json:"workload"`
	Action   string    `json:"action"`
	Pod      string    `json:"pod"`
	UID      types.UID `json:"uid"`
	Node     string    `json:"node"`
	// Budget names the PodDisruptionBudgets the step uses, with what they
	// allow in the plan's snapshot.
	Budget string `json:"budget,omitempty"`
}

// Make plans for the waiting pods of namespace ("" for every namespace):
// each pod's unit (its gang and the pods sharing its claims) once, the
// oldest first (advisor.PlanAll then puts higher priorities first).
func Make(ctx context.Context, o advisor.Objects, namespace string, opts advisor.Options) (*Plan, error) {
	var pending []*v1.Pod
	byKey := map[string]*v1.Pod{}
	for _, p := range o.Pods {
		byKey[p.Namespace+"/"+p.Name] = p
		if waiting(p) && (namespace == "" || p.Namespace == namespace) {
			pending = append(pending, p)
		}
	}
	sort.SliceStable(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	plan := &Plan{Units: []advisor.PlannedUnit{}, Evictions: []Eviction{}}
	if len(pending) == 0 {
		return plan, nil
	}
	// One snapshot for every waiting pod, as the WaitReason worker's round.
	b, err := advisor.NewBuilder(ctx, o)
	if err != nil {
		for range pending {
			plan.Skipped = append(plan.Skipped, err.Error())
		}
		return plan, nil
	}
	var units []*advisor.Workload
	seen := map[string]bool{}
	for _, p := range pending {
		unit, err := b.Unit(p)
		if err != nil {
			plan.Skipped = append(plan.Skipped, err.Error())
			continue
		}
		if seen[unit.Key] {
			continue
		}
		seen[unit.Key] = true
		units = append(units, unit)
	}
	if len(units) == 0 {
		return plan, nil
	}
	plan.Units = advisor.PlanAll(b.Snapshot(), units, opts)
	for _, pu := range plan.Units {
		if pu.Move == nil {
			continue
		}
		for _, st := range pu.Move.Steps {
			for _, pk := range st.Pods {
				e := Eviction{Unit: pu.Workload, Workload: st.Workload, Action: st.Action, Pod: pk, Budget: st.Budget}
				if p := byKey[pk]; p != nil {
					e.UID, e.Node = p.UID, p.Spec.NodeName
				}
				plan.Evictions = append(plan.Evictions, e)
			}
		}
	}
	return plan, nil
}

// Waiting counts the units the plan is about.
func (p *Plan) Waiting() int { return len(p.Units) + len(p.Skipped) }

// signature is the plan's evictions as "unit ← pod" lines (with the
// workload when it is not the pod alone), for
// comparing a plan with one made later; units not in only (when not nil)
// are left out.
func (p *Plan) signature(only map[string]bool) []string {
	var out []string
	for _, e := range p.Evictions {
		if only == nil || only[e.Unit] {
			line := e.Unit + " ← " + e.Pod
			if e.Workload != e.Pod {
				line += " of " + e.Workload
			}
			out = append(out, line)
		}
	}
	return out
}

// Differs says how p's evictions differ from approved's (the same pods,
// by UID, for the same units, in the same order), or "" when they do not.
func (p *Plan) Differs(approved *Plan) string {
	line := func(e Eviction) string { return fmt.Sprintf("%s ← %s (uid %s)", e.Unit, e.Pod, e.UID) }
	var want, got []string
	for _, e := range approved.Evictions {
		want = append(want, line(e))
	}
	for _, e := range p.Evictions {
		got = append(got, line(e))
	}
	if slices.Equal(want, got) {
		return ""
	}
	return fmt.Sprintf("approved [%s], now [%s]", strings.Join(want, "; "), strings.Join(got, "; "))
}
