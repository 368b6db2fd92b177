package schedule

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Schedule is a DeploySchedule compiled for evaluation: zone loaded, crons parsed,
// window states indexed by target.
type Schedule struct {
	loc     *time.Location
	order   v1alpha1.TransitionOrder
	targets []target
	windows []window
}

type target struct {
	name          string
	defaultIntent Intent
	// windows are the windows that set a state for this target.
	windows []windowState
}

type windowState struct {
	window int
	intent Intent
}

type window struct {
	name     string
	priority int32
	// A recurring window has cron and duration; a one-shot window has from/until.
	cron        *Cron
	duration    time.Duration
	from, until time.Time
}

// Location is the zone the schedule's crons are read in.
func (s *Schedule) Location() *time.Location { return s.loc }

// LoadLocation loads an IANA time zone by name. Unlike time.LoadLocation it
// refuses "" and "Local", which would make the answer depend on the machine.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("%q is not an IANA time zone name", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("loading IANA time zone: %w", err)
	}
	return loc, nil
}

// durationPattern is the CRD's syntax for Duration: Go syntax without a sign.
var durationPattern = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// ParseDuration parses a window duration: a positive Go duration such as 10h or
// 1h30m, written as the CRD accepts it (no sign).
func ParseDuration(d v1alpha1.Duration) (time.Duration, error) {
	if !durationPattern.MatchString(string(d)) {
		return 0, fmt.Errorf("%q is not a duration such as 10h, 90m or 1h30m", d)
	}
	parsed, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, fmt.Errorf("invalid duration: %w", err)
	}
	if parsed <= 0 {
		return 0, errors.New("duration must be positive")
	}
	return parsed, nil
}

// Compile prepares ds for evaluation. It fails on what it cannot evaluate (zone,
// cron, duration, a state naming no target, neither or both of recurring and
// oneShot); the validation package reports every problem with its field path and
// should run first.
func Compile(ds *v1alpha1.DeploySchedule) (*Schedule, error) {
	spec := &ds.Spec
	loc, err := LoadLocation(spec.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("spec.timeZone: %w", err)
	}
	s := &Schedule{loc: loc, order: spec.TransitionOrder}
	index := make(map[string]int, len(spec.Targets))
	for i, t := range spec.Targets {
		index[t.Name] = i
		def := Intent{State: t.DefaultState, AllowDowntime: t.DefaultAllowDowntime, Source: SourceDefault}
		if t.DefaultReplicas != nil && t.DefaultState == v1alpha1.StateRunning {
			def.Replicas = int32(*t.DefaultReplicas)
		}
		s.targets = append(s.targets, target{name: t.Name, defaultIntent: def})
	}
	for i := range spec.Windows {
		w, err := compileWindow(&spec.Windows[i])
		if err != nil {
			return nil, fmt.Errorf("spec.windows[%d]: %w", i, err)
		}
		s.windows = append(s.windows, w)
		for _, st := range spec.Windows[i].States {
			ti, ok := index[st.Target]
			if !ok {
				return nil, fmt.Errorf("spec.windows[%d]: state for undeclared target %q", i, st.Target)
			}
			s.targets[ti].windows = append(s.targets[ti].windows, windowState{
				window: i,
				intent: stateIntent(st, spec.Targets[ti], w.name),
			})
		}
	}
	return s, nil
}

func compileWindow(w *v1alpha1.ScheduleWindow) (window, error) {
	out := window{name: w.Name, priority: w.Priority}
	switch {
	case (w.Recurring == nil) == (w.OneShot == nil):
		return out, errors.New("exactly one of recurring or oneShot must be set")
	case w.Recurring != nil:
		c, err := ParseCron(w.Recurring.Cron)
		if err != nil {
			return out, fmt.Errorf("recurring.cron: %w", err)
		}
		d, err := ParseDuration(w.Recurring.Duration)
		if err != nil {
			return out, fmt.Errorf("recurring.duration: %w", err)
		}
		out.cron, out.duration = c, d
	default:
		out.from, out.until = w.OneShot.ActiveFrom.Time, w.OneShot.ActiveUntil.Time
	}
	return out, nil
}

func stateIntent(st v1alpha1.TargetState, t v1alpha1.ScheduleTarget, source string) Intent {
	in := Intent{State: st.DesiredState, AllowDowntime: t.DefaultAllowDowntime, Source: source}
	if st.AllowDowntime != nil {
		in.AllowDowntime = *st.AllowDowntime
	}
	if st.Replicas != nil && st.DesiredState == v1alpha1.StateRunning {
		in.Replicas = int32(*st.Replicas)
	}
	return in
}
