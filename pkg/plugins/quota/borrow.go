package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// A pod that takes its tenant beyond its GPUQuota guarantee borrows: the
// scheduler marks it (gpuv1.BorrowedAnnotation, "H100=2") before it binds,
// and a reclaim may evict it later to give the GPUs back to a tenant whose
// guarantee they belong to. Reserve works out what the pod borrows from
// the devices actually allocated and the tenant's usage; PreBind writes or
// removes the mark. Only the scheduler may write it
// (manifests/admission/borrower-mark-policy.yaml).

const borrowStateKey fwk.StateKey = "Borrowed" + Name

// borrowState is what the pod borrows, per model; empty when it borrows
// nothing. Written in Reserve (or PreBind for extended resources), never
// changed afterwards.
type borrowState struct {
	models map[string]int64
}

func (s *borrowState) Clone() fwk.StateData { return s }

// borrowedOf is what a grant borrows for namespace holding use: per model
// that some tenant is guaranteed, the part beyond the namespace's own
// guarantee (a namespace without one borrows everything it takes). Where
// no tenant is guaranteed a model, nothing of it is borrowed: there is no
// guarantee to reclaim it for.
func borrowedOf(table *gpuquota.Table, namespace string, use, granted map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for m, n := range granted {
		if !table.HasGuarantees(m) {
			continue
		}
		terms, _ := table.TermsOrDefault(namespace, m)
		if b := terms.Borrowed(int(use[m]), int(n)); b > 0 {
			out[m] = int64(b)
		}
	}
	return out
}

// BorrowMark is the value of the borrower mark for borrowed devices per
// model: "A100=1,H100=2"; "" when nothing is borrowed.
func BorrowMark(models map[string]int64) string {
	keys := make([]string, 0, len(models))
	for m, n := range models {
		if n > 0 {
			keys = append(keys, m)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, m := range keys {
		parts = append(parts, m+"="+strconv.FormatInt(models[m], 10))
	}
	return strings.Join(parts, ",")
}

// ParseBorrowMark reads a borrower mark; malformed parts are skipped.
func ParseBorrowMark(v string) map[string]int64 {
	out := map[string]int64{}
	for _, part := range strings.Split(v, ",") {
		m, n, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || m == "" {
			continue
		}
		if c, err := strconv.ParseInt(n, 10, 64); err == nil && c > 0 {
			out[m] = c
		}
	}
	return out
}

// lendingRefusal returns a message when granting borrows GPUs that other
// tenants keep free for themselves: their idle guarantee beyond their
// lending limit. pl.mu must be held.
func (pl *Quota) lendingRefusal(ns string, inv *gpupool.Inventory, borrowed, granted map[string]int64) (string, error) {
	table := pl.live.Table()
	for _, m := range sortedModels(borrowed) {
		var err error
		unlendable := table.Unlendable(ns, m, func(other string) int {
			if err != nil {
				return 0
			}
			use, uerr := pl.usageLocked(other, inv, nil)
			err = uerr
			return int(use[m])
		})
		if err != nil {
			return "", err
		}
		if unlendable == 0 {
			continue
		}
		free := int64(freeOfModel(inv, m, pl.args.ModelAttribute))
		if free-granted[m] < int64(unlendable) {
			return fmt.Sprintf("%s would borrow %d %s, but %d of the %d free %s are idle guarantees other tenants do not lend", ns, borrowed[m], m, unlendable, free, m), nil
		}
	}
	return "", nil
}

// freeOfModel counts the pool's unallocated devices of model that no taint
// keeps from an untolerating pod.
func freeOfModel(inv *gpupool.Inventory, model, attr string) int {
	n := 0
	for _, node := range inv.Nodes {
		for _, nd := range inv.ByNode[node] {
			if d := inv.DeviceOf(node, nd); d.Allocated || len(d.Consumed) > 0 || gpupool.BlockingTaint(d.Device, nil) != nil {
				continue
			}
			if gpupool.StringAttribute(nd.Device, nd.ID.Driver.String(), resourceapi.QualifiedName(attr)) == model {
				n++
			}
		}
	}
	return n
}

// markBorrower writes the pod's borrower mark as cs says, or removes a
// mark the pod carries from an earlier placement.
func (pl *Quota) markBorrower(ctx context.Context, cs fwk.CycleState, pod *v1.Pod) *fwk.Status {
	want := ""
	if s, err := cs.Read(borrowStateKey); err == nil {
		want = BorrowMark(s.(*borrowState).models)
	}
	have, marked := pod.Annotations[gpuv1.BorrowedAnnotation]
	if have == want && (marked || want == "") {
		return nil
	}
	var value any
	if want != "" {
		value = want
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{gpuv1.BorrowedAnnotation: value}}})
	if err != nil {
		return fwk.AsStatus(err)
	}
	if _, err := pl.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fwk.AsStatus(fmt.Errorf("marking pod %s/%s as borrowing %q: %w", pod.Namespace, pod.Name, want, err))
	}
	klog.FromContext(ctx).V(3).Info("Borrower mark written", "pod", klog.KObj(pod), "borrowed", want)
	return nil
}
