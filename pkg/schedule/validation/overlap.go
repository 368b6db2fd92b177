package validation

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
)

const timeLayout = time.RFC3339

// ValidateDeployScheduleInRange runs ValidateDeploySchedule and, when the schedule
// is otherwise valid, rejects equal-priority windows that are both active for one
// target somewhere in [from, to) where at least one of them is recurring: those
// overlaps can only be found by evaluating. (One-shot pairs are checked without a
// range by ValidateDeploySchedule.)
func ValidateDeployScheduleInRange(ds *v1alpha1.DeploySchedule, from, to time.Time) field.ErrorList {
	if allErrs := ValidateDeploySchedule(ds); len(allErrs) > 0 {
		return allErrs
	}
	compiled, err := schedule.Compile(ds)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), fmt.Errorf("valid schedule failed to compile: %w", err))}
	}
	windows := ds.Spec.Windows
	spans := make([][]schedule.Span, len(windows))
	for i := range windows {
		if spans[i], err = compiled.ActiveSpans(i, from, to); err != nil {
			return field.ErrorList{field.InternalError(field.NewPath("spec", "windows").Index(i), err)}
		}
	}
	var allErrs field.ErrorList
	fldPath := field.NewPath("spec", "windows")
	for j := range windows {
		for i := range j {
			a, b := &windows[i], &windows[j]
			if a.Priority != b.Priority || (a.OneShot != nil && b.OneShot != nil) {
				continue
			}
			targets := sharedTargets(a, b)
			if len(targets) == 0 {
				continue
			}
			if at, ok := firstOverlap(spans[i], spans[j], from, to); ok {
				allErrs = append(allErrs, overlapError(fldPath, i, j, a, b, targets[0], at.In(compiled.Location())))
			}
		}
	}
	return allErrs
}

// validateOneShotOverlaps rejects equal-priority one-shot windows that share a
// target and overlap in time.
func validateOneShotOverlaps(spec *v1alpha1.DeployScheduleSpec, fldPath *field.Path) field.ErrorList {
	loc, err := schedule.LoadLocation(spec.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	var allErrs field.ErrorList
	for j := range spec.Windows {
		for i := range j {
			a, b := &spec.Windows[i], &spec.Windows[j]
			if a.Priority != b.Priority || a.OneShot == nil || b.OneShot == nil {
				continue
			}
			targets := sharedTargets(a, b)
			start := latest(a.OneShot.ActiveFrom.Time, b.OneShot.ActiveFrom.Time)
			end := earliest(a.OneShot.ActiveUntil.Time, b.OneShot.ActiveUntil.Time)
			if len(targets) > 0 && start.Before(end) {
				allErrs = append(allErrs, overlapError(fldPath, i, j, a, b, targets[0], start.In(loc)))
			}
		}
	}
	return allErrs
}

func overlapError(fldPath *field.Path, i, j int, a, b *v1alpha1.ScheduleWindow, target string, at time.Time) *field.Error {
	return field.Invalid(fldPath.Index(j), b.Name, fmt.Sprintf(
		"windows %q (%s) and %q (%s) have the same priority %d and are both active for target %q at %s; "+
			"give one of them a higher priority or move them apart",
		a.Name, fldPath.Index(i), b.Name, fldPath.Index(j), a.Priority, target, at.Format(timeLayout)))
}

// sharedTargets returns the targets both windows set a state for, in a's order.
func sharedTargets(a, b *v1alpha1.ScheduleWindow) []string {
	var out []string
	for _, sa := range a.States {
		for _, sb := range b.States {
			if sa.Target == sb.Target {
				out = append(out, sa.Target)
				break
			}
		}
	}
	return out
}

// firstOverlap returns the first instant in [from, to) covered by a span of both
// lists (each sorted and disjoint).
func firstOverlap(a, b []schedule.Span, from, to time.Time) (time.Time, bool) {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		start := latest(latest(a[i].Start, b[j].Start), from)
		end := earliest(earliest(a[i].End, b[j].End), to)
		if start.Before(end) {
			return start, true
		}
		if a[i].End.Before(b[j].End) {
			i++
		} else {
			j++
		}
	}
	return time.Time{}, false
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
