package quotastatus

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// ReasonInvalidSpec is the GuaranteesFit reason (status Unknown) of a
// GPUQuota that fails gpuquota.Validate: its terms are not applied, and
// its numbers are not computed.
const ReasonInvalidSpec = "InvalidSpec"

// ComputeStatus is the status q should have, given every model's report
// (gpuquota.Account of every valid GPUQuota) and q's validation errors; it
// has no side effects. The condition keeps its LastTransitionTime while
// its status stays the same.
func ComputeStatus(q *rotav1.GPUQuota, reports map[string]gpuquota.ModelReport, invalid field.ErrorList, now metav1.Time) rotav1.GPUQuotaStatus {
	st := rotav1.GPUQuotaStatus{
		ObservedGeneration: q.Generation,
		Conditions:         append([]metav1.Condition(nil), q.Status.Conditions...),
	}
	cond := metav1.Condition{Type: rotav1.ConditionGuaranteesFit, ObservedGeneration: q.Generation, LastTransitionTime: now}
	if len(invalid) > 0 {
		cond.Status, cond.Reason = metav1.ConditionUnknown, ReasonInvalidSpec
		cond.Message = "the spec is invalid and not applied: " + invalid.ToAggregate().Error()
		meta.SetStatusCondition(&st.Conditions, cond)
		return st
	}
	fits := true
	explained := make([]string, 0, len(q.Spec.Models))
	for _, m := range q.Spec.Models {
		r, ok := reports[m.Model]
		if !ok {
			// Account reports every model of a valid GPUQuota; an empty
			// report says the pool has none of it.
			r = gpuquota.ModelReport{Model: m.Model}
		}
		ms := rotav1.ModelQuotaStatus{Model: m.Model, Guaranteed: m.Guaranteed}
		for _, n := range r.Tenants {
			if n.Namespace == q.Name {
				ms.Used, ms.Borrowed, ms.Lent = int32(n.Used), int32(n.Borrowed), int32(n.Lent)
			}
		}
		st.Models = append(st.Models, ms)
		fits = fits && r.Fits()
		explained = append(explained, r.Explain())
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, rotav1.ReasonGuaranteesFit
	if !fits {
		cond.Status, cond.Reason = metav1.ConditionFalse, rotav1.ReasonGuaranteesExceedPool
	}
	cond.Message = strings.Join(explained, "; ")
	meta.SetStatusCondition(&st.Conditions, cond)
	return st
}

// Reports indexes reports by model.
func Reports(reports []gpuquota.ModelReport) map[string]gpuquota.ModelReport {
	out := make(map[string]gpuquota.ModelReport, len(reports))
	for _, r := range reports {
		out[r.Model] = r
	}
	return out
}
