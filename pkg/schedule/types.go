package schedule

import (
	"time"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// SourceDefault is the Source of an intent that no window sets.
const SourceDefault = "default"

// Intent is what one target should be: docs/schedule.md's (state, replicas, allowDowntime,
// source). It is comparable, so equal intents are ==.
type Intent struct {
	State v1alpha1.DesiredState
	// Replicas is the pinned replica count; 0 means not pinned (Rota leaves the
	// scale alone). A Stopped intent is never pinned.
	Replicas int32
	// AllowDowntime is the consent to stop the target while it serves an alias.
	AllowDowntime bool
	// Source is the winning window's name, or SourceDefault.
	Source string
}

// Interval is a maximal stretch [Start, End) of constant intent for one target.
type Interval struct {
	Target     string
	Start, End time.Time
	Intent
}

// Action is what a transition step does to a target's workload.
type Action string

// Step actions.
const (
	// ActionStop scales the workload to zero.
	ActionStop Action = "Stop"
	// ActionStart brings the workload back, at Replicas if pinned.
	ActionStart Action = "Start"
	// ActionScale changes a running workload's pinned replica count (0: unpin).
	ActionScale Action = "Scale"
)

// Step is one action of a transition.
type Step struct {
	Target string
	Action Action
	// Replicas is the pinned count the step moves to; 0 means not pinned.
	Replicas int32
}

// Transition is the plan executed at an instant where some target's (state,
// replicas) changes, in execution order.
type Transition struct {
	At    time.Time
	Steps []Step
}

// Timeline is the evaluation of a schedule over a range [from, to).
type Timeline struct {
	// Intervals tile [from, to) for every target, sorted by start, then target name.
	Intervals []Interval
	// Transitions are in time order; the state at from is not a transition.
	Transitions []Transition
}
