package controller

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// workloadIndex indexes schedules by the workloads they name, for ownership.
const workloadIndex = "workload"

// ownership is the ownership step (docs/schedule.md, "A pass", step 3): a
// workload named by several schedules of a namespace belongs to the one
// created first (then by name). Deciding it needs no write, so Observe mode
// mutates nothing and the first schedule keeps the workload.
type ownership struct {
	// index is the DeploySchedule informer; nil or not synced: the
	// schedules are listed from the API.
	index     cache.SharedIndexInformer
	schedules schedules
}

// check returns TargetOwned and its message when another schedule owns the
// workload ref of ds ("" when ds does).
func (o ownership) check(ctx context.Context, ds *v1alpha1.DeploySchedule, ref v1alpha1.WorkloadReference) (reason, msg string, err error) {
	owner, err := o.ownerOf(ctx, ds.Namespace, ref)
	if err != nil {
		return "", "", err
	}
	if owner == nil || owner.GetUID() == ds.UID {
		return "", "", nil
	}
	return ReasonTargetOwned, fmt.Sprintf("%s %s is already driven by DeploySchedule %s (created first); this schedule leaves it alone",
		ref.Kind, ref.Name, owner.GetName()), nil
}

// ownerOf returns the schedule that owns a workload: among the schedules of
// the namespace that name it, the one created first, then by name.
func (o ownership) ownerOf(ctx context.Context, namespace string, ref v1alpha1.WorkloadReference) (metav1.Object, error) {
	candidates, err := o.schedulesNaming(ctx, namespace, ref)
	if err != nil {
		return nil, err
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i].GetCreationTimestamp(), candidates[j].GetCreationTimestamp()
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return candidates[i].GetName() < candidates[j].GetName()
	})
	return candidates[0], nil
}

// schedulesNaming lists the schedules of a namespace that name the workload,
// from the informer's index when it has synced, else from the API.
func (o ownership) schedulesNaming(ctx context.Context, namespace string, ref v1alpha1.WorkloadReference) ([]metav1.Object, error) {
	key := workloadKey(namespace, ref)
	if o.index != nil && o.index.HasSynced() {
		objs, err := o.index.GetIndexer().ByIndex(workloadIndex, key)
		if err != nil {
			return nil, fmt.Errorf("schedule index: %w", err)
		}
		out := make([]metav1.Object, 0, len(objs))
		for _, obj := range objs {
			if m, ok := obj.(metav1.Object); ok {
				out = append(out, m)
			}
		}
		return out, nil
	}
	list, err := o.schedules.list(ctx, namespace, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []metav1.Object
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

// indexByWorkload is the informer's workloadIndex function. A schedule that
// does not decode is left out of the index (an index function's error would
// stop the informer); its own pass reports the decode error.
func indexByWorkload(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	var ds v1alpha1.DeploySchedule
	if fromUnstructured(u, &ds) != nil {
		return nil, nil
	}
	keys := make([]string, 0, len(ds.Spec.Targets))
	for _, t := range ds.Spec.Targets {
		keys = append(keys, workloadKey(ds.Namespace, t.WorkloadRef))
	}
	return keys, nil
}

// workloadKey identifies a workload across schedules of a namespace.
func workloadKey(namespace string, ref v1alpha1.WorkloadReference) string {
	return namespace + "/" + schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind().String() + "/" + ref.Name
}
