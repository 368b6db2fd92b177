package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

func validateWindows(spec *v1alpha1.DeployScheduleSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(spec.Windows) > maxWindows {
		allErrs = append(allErrs, field.TooMany(fldPath, len(spec.Windows), maxWindows))
	}
	targets := sets.New[string]()
	for _, t := range spec.Targets {
		targets.Insert(t.Name)
	}
	names := sets.New[string]()
	for i := range spec.Windows {
		w := &spec.Windows[i]
		wPath := fldPath.Index(i)
		allErrs = append(allErrs, validateDNSLabel(w.Name, wPath.Child("name"))...)
		if w.Name != "" && names.Has(w.Name) {
			allErrs = append(allErrs, field.Duplicate(wPath.Child("name"), w.Name))
		}
		names.Insert(w.Name)
		if w.Priority < 0 || w.Priority > maxWindowPriority {
			allErrs = append(allErrs, field.Invalid(wPath.Child("priority"), w.Priority,
				fmt.Sprintf("must be between 0 and %d", maxWindowPriority)))
		}
		allErrs = append(allErrs, validateWindowTime(w, wPath)...)
		allErrs = append(allErrs, validateStates(w.States, targets, wPath.Child("states"))...)
	}
	return allErrs
}

func validateWindowTime(w *v1alpha1.ScheduleWindow, fldPath *field.Path) field.ErrorList {
	switch {
	case w.Recurring == nil && w.OneShot == nil:
		return field.ErrorList{field.Required(fldPath, "exactly one of recurring or oneShot must be set")}
	case w.Recurring != nil && w.OneShot != nil:
		return field.ErrorList{field.Forbidden(fldPath.Child("oneShot"), "exactly one of recurring or oneShot must be set")}
	case w.Recurring != nil:
		return validateRecurring(w.Recurring, fldPath.Child("recurring"))
	default:
		return validateOneShot(w.OneShot, fldPath.Child("oneShot"))
	}
}

func validateRecurring(r *v1alpha1.RecurringWindow, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	cronPath := fldPath.Child("cron")
	switch {
	case r.Cron == "":
		allErrs = append(allErrs, field.Required(cronPath, `a five-field cron expression such as "0 8 * * 1-5"`))
	case len(r.Cron) > maxCronLength:
		allErrs = append(allErrs, field.TooLong(cronPath, "", maxCronLength))
	default:
		if _, err := schedule.ParseCron(r.Cron); err != nil {
			allErrs = append(allErrs, field.Invalid(cronPath, r.Cron, err.Error()))
		}
	}
	return append(allErrs, validateDuration(r.Duration, fldPath.Child("duration"))...)
}

func validateOneShot(o *v1alpha1.OneShotWindow, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if o.ActiveFrom.IsZero() {
		allErrs = append(allErrs, field.Required(fldPath.Child("activeFrom"), "an RFC 3339 time"))
	}
	if o.ActiveUntil.IsZero() {
		allErrs = append(allErrs, field.Required(fldPath.Child("activeUntil"), "an RFC 3339 time"))
	}
	if len(allErrs) == 0 && !o.ActiveFrom.Before(&o.ActiveUntil) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("activeUntil"), o.ActiveUntil.UTC().Format(timeLayout),
			"activeFrom must be before activeUntil"))
	}
	return allErrs
}

func validateStates(states []v1alpha1.TargetState, targets sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case len(states) == 0:
		return field.ErrorList{field.Required(fldPath, "at least one target state")}
	case len(states) > maxStates:
		allErrs = append(allErrs, field.TooMany(fldPath, len(states), maxStates))
	}
	seen := sets.New[string]()
	for i := range states {
		st := &states[i]
		sPath := fldPath.Index(i)
		tPath := sPath.Child("target")
		switch {
		case st.Target == "":
			allErrs = append(allErrs, field.Required(tPath, ""))
		case !targets.Has(st.Target):
			allErrs = append(allErrs, field.Invalid(tPath, st.Target, "must name a target declared in spec.targets"))
		case seen.Has(st.Target):
			allErrs = append(allErrs, field.Duplicate(tPath, st.Target))
		}
		seen.Insert(st.Target)
		allErrs = append(allErrs, validateEnum(string(st.DesiredState), desiredStates, true, sPath.Child("desiredState"))...)
		allErrs = append(allErrs, validateReplicas(st.Replicas, st.DesiredState, "desiredState", sPath.Child("replicas"))...)
	}
	return allErrs
}
