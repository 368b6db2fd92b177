// Package validation checks Rota API objects with field paths. The controller, the
// schedule-controller CLI and a future admission webhook share it, so a schedule
// gets the same answer offline as from the API server: it repeats the rules the
// CRD schema enforces for one object and adds those the schema cannot express.
package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

// Limits of the DeploySchedule CRD schema.
const (
	maxTimeZoneLength = 64
	maxTargets        = 32
	maxWindows        = 64
	maxStates         = 32
	maxRefLength      = 253
	maxCronLength     = 128
	maxDurationLength = 32
	maxWindowPriority = 1000000
)

var (
	modes            = []string{string(v1alpha1.ScheduleModeEnforce), string(v1alpha1.ScheduleModeObserve)}
	transitionOrders = []string{string(v1alpha1.TransitionOrderReleaseFirst), string(v1alpha1.TransitionOrderAcquireFirst)}
	desiredStates    = []string{string(v1alpha1.StateRunning), string(v1alpha1.StateStopped)}
	workloadKinds    = []string{"Deployment", "StatefulSet", "LeaderWorkerSet"}
)

// ValidateDeploySchedule checks everything that can be decided from the object
// alone, including overlaps of equal-priority one-shot windows. Overlaps that
// involve a recurring window need a time range: see ValidateDeployScheduleInRange.
func ValidateDeploySchedule(ds *v1alpha1.DeploySchedule) field.ErrorList {
	if ds == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no DeploySchedule given")}
	}
	allErrs := validateName(ds.Name, ds.Namespace)
	spec := &ds.Spec
	specPath := field.NewPath("spec")
	allErrs = append(allErrs, validateTimeZone(spec.TimeZone, specPath.Child("timeZone"))...)
	allErrs = append(allErrs, validateEnum(string(spec.Mode), modes, false, specPath.Child("mode"))...)
	allErrs = append(allErrs, validateEnum(string(spec.TransitionOrder), transitionOrders, false, specPath.Child("transitionOrder"))...)
	allErrs = append(allErrs, validateTimeouts(spec.Timeouts, specPath.Child("timeouts"))...)
	allErrs = append(allErrs, validateTargets(spec.Targets, specPath.Child("targets"))...)
	allErrs = append(allErrs, validateWindows(spec, specPath.Child("windows"))...)
	if len(allErrs) == 0 {
		allErrs = append(allErrs, validateOneShotOverlaps(spec, specPath.Child("windows"))...)
	}
	return allErrs
}

func validateName(name, namespace string) field.ErrorList {
	var allErrs field.ErrorList
	metaPath := field.NewPath("metadata")
	if name == "" {
		allErrs = append(allErrs, field.Required(metaPath.Child("name"), ""))
	}
	for _, msg := range utilvalidation.IsDNS1123Subdomain(name) {
		if name != "" {
			allErrs = append(allErrs, field.Invalid(metaPath.Child("name"), name, msg))
		}
	}
	if namespace != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(namespace) {
			allErrs = append(allErrs, field.Invalid(metaPath.Child("namespace"), namespace, msg))
		}
	}
	return allErrs
}

func validateTimeZone(tz string, fldPath *field.Path) field.ErrorList {
	switch {
	case tz == "":
		return field.ErrorList{field.Required(fldPath, "an IANA time zone such as Asia/Ho_Chi_Minh")}
	case len(tz) > maxTimeZoneLength:
		return field.ErrorList{field.TooLong(fldPath, "", maxTimeZoneLength)}
	}
	if _, err := schedule.LoadLocation(tz); err != nil {
		return field.ErrorList{field.Invalid(fldPath, tz, err.Error())}
	}
	return nil
}

func validateEnum(value string, allowed []string, required bool, fldPath *field.Path) field.ErrorList {
	switch {
	case value == "" && required:
		return field.ErrorList{field.Required(fldPath, fmt.Sprintf("one of %q", allowed))}
	case value == "":
		return nil
	case !sets.New(allowed...).Has(value):
		return field.ErrorList{field.NotSupported(fldPath, value, allowed)}
	}
	return nil
}

func validateTimeouts(t *v1alpha1.ScheduleTimeouts, fldPath *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	var allErrs field.ErrorList
	for _, d := range []struct {
		name  string
		value *v1alpha1.Duration
	}{{"stop", t.Stop}, {"capacity", t.Capacity}, {"readiness", t.Readiness}} {
		if d.value != nil {
			allErrs = append(allErrs, validateDuration(*d.value, fldPath.Child(d.name))...)
		}
	}
	return allErrs
}

func validateDuration(d v1alpha1.Duration, fldPath *field.Path) field.ErrorList {
	switch {
	case d == "":
		return field.ErrorList{field.Required(fldPath, "a positive duration such as 10h, 90m or 1h30m")}
	case len(d) > maxDurationLength:
		return field.ErrorList{field.TooLong(fldPath, "", maxDurationLength)}
	}
	if _, err := schedule.ParseDuration(d); err != nil {
		return field.ErrorList{field.Invalid(fldPath, string(d), err.Error())}
	}
	return nil
}

func validateReplicas(r *v1alpha1.Replicas, state v1alpha1.DesiredState, stateField string, fldPath *field.Path) field.ErrorList {
	switch {
	case r == nil:
		return nil
	case *r < 1:
		return field.ErrorList{field.Invalid(fldPath, int32(*r), "must be at least 1; to stop a target use desiredState Stopped")}
	case state != v1alpha1.StateRunning:
		return field.ErrorList{field.Forbidden(fldPath, fmt.Sprintf("applies only to %s Running", stateField))}
	}
	return nil
}

func validateDNSLabel(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(name) {
		allErrs = append(allErrs, field.Invalid(fldPath, name, msg))
	}
	return allErrs
}
