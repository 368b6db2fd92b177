// Package advisorinput reads what the unblock advisor plans on from the
// scheduler's informers and DRA manager: the WaitReason plugin's advice and
// the Reclaim plugin's reclaims build their snapshots from it.
package advisorinput

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/advisor"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// Read returns the advisor's objects as the scheduler sees them now: the
// pool, the device classes and compiled selectors, every pod and
// PodDisruptionBudget, and the claims through the DRA tracker. The caller
// adds the tenants' limits and the releases it knows of.
func Read(ctx context.Context, dra fwk.SharedDRAManager, caches *gpupool.Caches, pods corelisters.PodLister, pdbs policylisters.PodDisruptionBudgetLister) (advisor.Objects, error) {
	pool, err := gpupool.Snapshot(ctx, dra, &caches.Slices)
	if err != nil {
		return advisor.Objects{}, err
	}
	ps, err := pods.List(labels.Everything())
	if err != nil {
		return advisor.Objects{}, fmt.Errorf("list pods: %w", err)
	}
	budgets, err := pdbs.List(labels.Everything())
	if err != nil {
		return advisor.Objects{}, fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	return advisor.Objects{
		Pool: pool, Classes: dra.DeviceClasses(), CEL: caches.CEL, Matches: caches.Matches,
		Pods: ps, PDBs: budgets,
		Claim: func(ns, name string) (*resourceapi.ResourceClaim, error) {
			return dra.ResourceClaims().Get(ns, name)
		},
	}, nil
}
