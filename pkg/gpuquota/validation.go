package gpuquota

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Validate reports every invalid field of q with its path, as the CRD's
// schema and CEL rules would: the scheduler and the controller skip a
// GPUQuota that fails (one written before the CRD was updated, or through
// a path that bypassed the schema) instead of acting on half of it.
func Validate(q *rotav1.GPUQuota) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(q.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), q.Name, "the name is the tenant's namespace: "+msg))
	}
	spec := field.NewPath("spec")
	if len(q.Spec.Models) == 0 {
		errs = append(errs, field.Required(spec.Child("models"), "at least one model"))
	}
	seen := map[string]bool{}
	for i, m := range q.Spec.Models {
		p := spec.Child("models").Index(i)
		if m.Model == "" {
			errs = append(errs, field.Required(p.Child("model"), ""))
		}
		if seen[m.Model] {
			errs = append(errs, field.Duplicate(p.Child("model"), m.Model))
		}
		seen[m.Model] = true
		if m.Guaranteed < 0 {
			errs = append(errs, field.Invalid(p.Child("guaranteed"), m.Guaranteed, "must be 0 or more"))
		}
		if m.BorrowingLimit != nil && *m.BorrowingLimit < 0 {
			errs = append(errs, field.Invalid(p.Child("borrowingLimit"), *m.BorrowingLimit, "must be 0 or more"))
		}
		if m.LendingLimit != nil {
			switch {
			case *m.LendingLimit < 0:
				errs = append(errs, field.Invalid(p.Child("lendingLimit"), *m.LendingLimit, "must be 0 or more"))
			case *m.LendingLimit > m.Guaranteed:
				errs = append(errs, field.Invalid(p.Child("lendingLimit"), *m.LendingLimit, "cannot exceed guaranteed: a tenant lends only what it is guaranteed"))
			}
		}
	}
	switch q.Spec.OverLimit {
	case "", rotav1.OverLimitWait, rotav1.OverLimitRefuse:
	default:
		errs = append(errs, field.NotSupported(spec.Child("overLimit"), q.Spec.OverLimit, []rotav1.OverLimitPolicy{rotav1.OverLimitWait, rotav1.OverLimitRefuse}))
	}
	return errs
}
