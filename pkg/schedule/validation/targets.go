package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func validateTargets(targets []v1alpha1.ScheduleTarget, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case len(targets) == 0:
		return field.ErrorList{field.Required(fldPath, "at least one target")}
	case len(targets) > maxTargets:
		allErrs = append(allErrs, field.TooMany(fldPath, len(targets), maxTargets))
	}
	names := sets.New[string]()
	type workload struct{ kind, name string }
	workloads := map[workload]int{}
	for i := range targets {
		t := &targets[i]
		tPath := fldPath.Index(i)
		allErrs = append(allErrs, validateDNSLabel(t.Name, tPath.Child("name"))...)
		if t.Name != "" && names.Has(t.Name) {
			allErrs = append(allErrs, field.Duplicate(tPath.Child("name"), t.Name))
		}
		names.Insert(t.Name)

		allErrs = append(allErrs, validateWorkloadRef(&t.WorkloadRef, tPath.Child("workloadRef"))...)
		w := workload{t.WorkloadRef.Kind, t.WorkloadRef.Name}
		if first, ok := workloads[w]; ok && w.name != "" {
			allErrs = append(allErrs, field.Invalid(tPath.Child("workloadRef"), w.kind+"/"+w.name,
				fmt.Sprintf("also the workload of %s; a workload belongs to at most one target", fldPath.Index(first))))
		} else if !ok {
			workloads[w] = i
		}

		allErrs = append(allErrs, validateEnum(string(t.DefaultState), desiredStates, true, tPath.Child("defaultState"))...)
		allErrs = append(allErrs, validateReplicas(t.DefaultReplicas, t.DefaultState, "defaultState", tPath.Child("defaultReplicas"))...)
		if len(t.ReservationName) > maxRefLength {
			allErrs = append(allErrs, field.TooLong(tPath.Child("reservationName"), "", maxRefLength))
		}
	}
	return allErrs
}

func validateWorkloadRef(ref *v1alpha1.WorkloadReference, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, f := range []struct{ name, value string }{{"apiVersion", ref.APIVersion}, {"name", ref.Name}} {
		switch {
		case f.value == "":
			allErrs = append(allErrs, field.Required(fldPath.Child(f.name), ""))
		case len(f.value) > maxRefLength:
			allErrs = append(allErrs, field.TooLong(fldPath.Child(f.name), "", maxRefLength))
		}
	}
	return append(allErrs, validateEnum(ref.Kind, workloadKinds, true, fldPath.Child("kind"))...)
}
