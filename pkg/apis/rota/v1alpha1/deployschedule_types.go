package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScheduleMode says whether a DeploySchedule changes workloads or only reports.
// +kubebuilder:validation:Enum=Enforce;Observe
type ScheduleMode string

const (
	// ScheduleModeEnforce computes intents and executes transitions.
	ScheduleModeEnforce ScheduleMode = "Enforce"
	// ScheduleModeObserve computes intents and reports them in status only.
	ScheduleModeObserve ScheduleMode = "Observe"
)

// TransitionOrder says whether a transition frees GPUs before taking new ones.
// +kubebuilder:validation:Enum=ReleaseFirst;AcquireFirst
type TransitionOrder string

const (
	// TransitionOrderReleaseFirst runs every stop and scale-down before any start or
	// scale-up, so the pool never needs room for both shifts at once.
	TransitionOrderReleaseFirst TransitionOrder = "ReleaseFirst"
	// TransitionOrderAcquireFirst starts the incoming shift first; it needs spare
	// capacity and must be asked for explicitly.
	TransitionOrderAcquireFirst TransitionOrder = "AcquireFirst"
)

// DesiredState is whether a target should have pods.
// +kubebuilder:validation:Enum=Running;Stopped
type DesiredState string

const (
	// StateRunning keeps the workload at its replicas (or at the pinned count).
	StateRunning DesiredState = "Running"
	// StateStopped scales the workload to zero.
	StateStopped DesiredState = "Stopped"
)

// DeploySchedule swaps workloads of its own namespace on a GPU pool by the clock.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dsched,categories=rota
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Time Zone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targetCount`
// +kubebuilder:printcolumn:name="Converged",type=integer,JSONPath=`.status.convergedCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Gate",type=string,JSONPath=`.status.gate`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DeploySchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec DeployScheduleSpec `json:"spec"`
	// +optional
	Status DeployScheduleStatus `json:"status,omitempty"`
}

// DeployScheduleSpec is the schedule: targets, their defaults and time windows.
//
// +kubebuilder:validation:XValidation:rule="!has(self.windows) || self.windows.all(w, w.states.all(s, self.targets.exists(t, t.name == s.target)))",message="every windows[].states[].target must name a target declared in spec.targets",fieldPath=".windows",reason=FieldValueInvalid
type DeployScheduleSpec struct {
	// TimeZone is the IANA time zone (e.g. Asia/Ho_Chi_Minh) in which cron
	// expressions are read.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone"`

	// Mode is Enforce (default) or Observe (compute and report only).
	// +optional
	// +kubebuilder:default=Enforce
	Mode ScheduleMode `json:"mode,omitempty"`

	// TransitionOrder is ReleaseFirst (default) or AcquireFirst.
	// +optional
	// +kubebuilder:default=ReleaseFirst
	TransitionOrder TransitionOrder `json:"transitionOrder,omitempty"`

	// Timeouts bound how long a transition step may wait before it becomes terminal.
	// +optional
	Timeouts *ScheduleTimeouts `json:"timeouts,omitempty"`

	// Targets are the workloads this schedule drives. A workload belongs to at most
	// one target of at most one schedule.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.exists_one(u, u.workloadRef.kind == t.workloadRef.kind && u.workloadRef.name == t.workloadRef.name))",message="two targets refer to the same workload; a workload belongs to at most one target"
	Targets []ScheduleTarget `json:"targets"`

	// Windows are the time windows, each setting states for some targets while it
	// is active. Outside every window a target is in its default state.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Windows []ScheduleWindow `json:"windows,omitempty"`
}

// ScheduleTimeouts are the waits after which a step fails with a terminal reason.
type ScheduleTimeouts struct {
	// Stop bounds how long a release may take (pods gone, claims deallocated)
	// before it fails with StopTimeout. Default 10m.
	// +optional
	Stop *Duration `json:"stop,omitempty"`
	// Capacity bounds how long an acquire waits for free GPUs after the boundary
	// before it fails with CapacityUnavailable. Default 15m.
	// +optional
	Capacity *Duration `json:"capacity,omitempty"`
	// Readiness bounds how long started pods may take to become ready before the
	// step fails with ReadinessTimeout. Default 10m.
	// +optional
	Readiness *Duration `json:"readiness,omitempty"`
}

// Duration is an elapsed time in Go syntax, such as 10h, 90m or 1h30m.
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="must be a positive Go duration such as 10h, 90m or 1h30m"
type Duration string

// WorkloadReference names a scalable workload in the schedule's namespace.
type WorkloadReference struct {
	// APIVersion of the workload, e.g. apps/v1.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// Kind of the workload.
	// +required
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;LeaderWorkerSet
	Kind string `json:"kind"`
	// Name of the workload.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ScheduleTarget is one workload driven by the schedule.
//
// +kubebuilder:validation:XValidation:rule="!has(self.defaultReplicas) || self.defaultState == 'Running'",message="defaultReplicas applies only to defaultState Running",fieldPath=".defaultReplicas"
type ScheduleTarget struct {
	// Name identifies the target inside the schedule.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// WorkloadRef is the workload, in the schedule's namespace.
	// +required
	WorkloadRef WorkloadReference `json:"workloadRef"`

	// DefaultState is the state outside every window that names this target.
	// +required
	DefaultState DesiredState `json:"defaultState"`

	// DefaultReplicas pins the replica count outside windows. Absent means Rota
	// never touches the scale while running.
	// +optional
	DefaultReplicas *Replicas `json:"defaultReplicas,omitempty"`

	// DefaultAllowDowntime is the consent to stop this target while it serves an
	// alias, used when a state does not say. Default false.
	// +optional
	DefaultAllowDowntime bool `json:"defaultAllowDowntime,omitempty"`

	// ReservationName binds the target to a GPUReservation of the same namespace:
	// transitions also pin the target's claims to the reservation's GPUs.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ReservationName string `json:"reservationName,omitempty"`
}

// Replicas is a pinned replica count. Zero is not a count: use Stopped.
// +kubebuilder:validation:XValidation:rule="self >= 1",message="replicas must be at least 1; to stop a target use desiredState Stopped"
type Replicas int32

// ScheduleWindow is a recurring or one-shot time window that sets target states.
//
// +kubebuilder:validation:XValidation:rule="has(self.recurring) != has(self.oneShot)",message="exactly one of recurring or oneShot must be set"
type ScheduleWindow struct {
	// Name identifies the window; intervals it wins report it as their source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Priority decides between active windows naming the same target: higher wins.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Priority int32 `json:"priority,omitempty"`

	// Recurring opens the window at every cron fire time for Duration.
	// +optional
	Recurring *RecurringWindow `json:"recurring,omitempty"`

	// OneShot opens the window once, on [activeFrom, activeUntil).
	// +optional
	OneShot *OneShotWindow `json:"oneShot,omitempty"`

	// States are the target states while this window is active.
	// +required
	// +listType=map
	// +listMapKey=target
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	States []TargetState `json:"states"`
}

// RecurringWindow is active on [s, s+duration) for every cron fire time s.
type RecurringWindow struct {
	// Cron is a standard five-field cron expression read in the schedule's time zone.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Cron string `json:"cron"`
	// Duration is the elapsed time the window stays open after each fire time.
	// +required
	Duration Duration `json:"duration"`
}

// OneShotWindow is active once, on [activeFrom, activeUntil).
//
// +kubebuilder:validation:XValidation:rule="self.activeFrom < self.activeUntil",message="activeFrom must be before activeUntil",fieldPath=".activeUntil"
type OneShotWindow struct {
	// +required
	ActiveFrom metav1.Time `json:"activeFrom"`
	// +required
	ActiveUntil metav1.Time `json:"activeUntil"`
}

// TargetState is what one window wants for one target.
//
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.desiredState == 'Running'",message="replicas applies only to desiredState Running",fieldPath=".replicas"
type TargetState struct {
	// Target names an entry of spec.targets.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Target string `json:"target"`
	// DesiredState is Running or Stopped.
	// +required
	DesiredState DesiredState `json:"desiredState"`
	// Replicas pins desired=min=max replicas while running; absent leaves the
	// scale alone.
	// +optional
	Replicas *Replicas `json:"replicas,omitempty"`
	// AllowDowntime consents to stopping the target while it serves an alias;
	// absent means the target's defaultAllowDowntime.
	// +optional
	AllowDowntime *bool `json:"allowDowntime,omitempty"`
}

// DeployScheduleStatus is what the controller observed and did.
type DeployScheduleStatus struct {
	// ObservedGeneration is the spec generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (every target converged to its current intent) and Valid.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// TargetCount is the number of targets, for printing.
	// +optional
	TargetCount int32 `json:"targetCount,omitempty"`
	// ConvergedCount is the number of targets at their current intent.
	// +optional
	ConvergedCount int32 `json:"convergedCount,omitempty"`
	// Gate is the cluster-wide switch as last read: off, observe, on, or
	// unreadable (treated as off).
	// +optional
	Gate string `json:"gate,omitempty"`
	// ApplyNowHandled is the last rota.dev/apply-now annotation value the
	// controller acted on; a different value asks for a new attempt.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ApplyNowHandled string `json:"applyNowHandled,omitempty"`
	// LastPassTime is when the controller last evaluated this schedule.
	// +optional
	LastPassTime *metav1.Time `json:"lastPassTime,omitempty"`
	// Targets is the status of each target.
	// +optional
	// +listType=map
	// +listMapKey=name
	Targets []TargetStatus `json:"targets,omitempty"`
}

// TargetPhase is where a target stands in its current transition.
// +kubebuilder:validation:Enum=Pending;Releasing;Acquiring;Converged;Waiting;Failed;Observed;Drifted
type TargetPhase string

// Target phases.
const (
	// TargetPhasePending: a step is planned and waits for its turn.
	TargetPhasePending TargetPhase = "Pending"
	// TargetPhaseReleasing: a stop or scale-down was submitted and is converging.
	TargetPhaseReleasing TargetPhase = "Releasing"
	// TargetPhaseAcquiring: a start or scale-up was submitted and is converging.
	TargetPhaseAcquiring TargetPhase = "Acquiring"
	// TargetPhaseConverged: the workload is at the current intent.
	TargetPhaseConverged TargetPhase = "Converged"
	// TargetPhaseWaiting: an expected wait (CapacityWait, gate off).
	TargetPhaseWaiting TargetPhase = "Waiting"
	// TargetPhaseFailed: a terminal reason for the current interval, with a fix text.
	TargetPhaseFailed TargetPhase = "Failed"
	// TargetPhaseObserved: Observe mode (or the observe gate) computed the plan only.
	TargetPhaseObserved TargetPhase = "Observed"
	// TargetPhaseDrifted: the workload was changed by hand after convergence; it
	// is reported, not reverted, until the intent changes.
	TargetPhaseDrifted TargetPhase = "Drifted"
)

// TargetStatus reports one target: its intent, what was observed and the steps taken.
type TargetStatus struct {
	// +required
	Name string `json:"name"`
	// +optional
	Phase TargetPhase `json:"phase,omitempty"`
	// Reason is a machine-readable CamelCase reason such as CapacityWait or AliasBlocked.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the reason and, for terminal reasons, how to fix it.
	// +optional
	Message string `json:"message,omitempty"`
	// Desired is the current intent and the window it comes from.
	// +optional
	Desired *TargetIntent `json:"desired,omitempty"`
	// Observed is the workload as last seen.
	// +optional
	Observed *ObservedWorkload `json:"observed,omitempty"`
	// LastProcessedInterval is the start of the last intent interval whose
	// transition was planned; a newer interval opens a new transition.
	// +optional
	LastProcessedInterval *metav1.Time `json:"lastProcessedInterval,omitempty"`
	// Steps are the steps of the current transition, with idempotency keys.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=16
	Steps []TransitionStep `json:"steps,omitempty"`
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// TargetIntent is the (state, replicas, allowDowntime, source) of an interval.
type TargetIntent struct {
	State         DesiredState `json:"state"`
	Replicas      *int32       `json:"replicas,omitempty"`
	AllowDowntime bool         `json:"allowDowntime"`
	// Source is the winning window's name, or "default".
	Source string `json:"source"`
	// IntervalStart is when this intent took effect.
	// +optional
	IntervalStart *metav1.Time `json:"intervalStart,omitempty"`
}

// ObservedWorkload is the scale and readiness of the workload as last seen.
type ObservedWorkload struct {
	// +optional
	Replicas int32 `json:"replicas"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// +optional
	Exists bool `json:"exists"`
}

// StepPhase is the crash-safety state of one step.
// +kubebuilder:validation:Enum=Planned;Submitting;Accepted;Succeeded;Failed
type StepPhase string

// Step phases: a step is recorded Submitting before its mutation, so a
// controller that restarts can finish it exactly once.
const (
	StepPlanned    StepPhase = "Planned"
	StepSubmitting StepPhase = "Submitting"
	StepAccepted   StepPhase = "Accepted"
	StepSucceeded  StepPhase = "Succeeded"
	StepFailed     StepPhase = "Failed"
)

// StepGroup says whether a step frees capacity or takes it.
type StepGroup string

// Step groups.
const (
	StepGroupRelease StepGroup = "Release"
	StepGroupAcquire StepGroup = "Acquire"
)

// TransitionStep is one release or acquire step.
type TransitionStep struct {
	// Key is the idempotency key: schedule UID, target, interval start and step.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Key string `json:"key"`
	// Action is Stop, Start or Scale.
	// +required
	// +kubebuilder:validation:Enum=Stop;Start;Scale
	Action string `json:"action"`
	// Group is Release (stop, scale-down) or Acquire (start, scale-up); the
	// transition order runs one group before the other.
	// +required
	// +kubebuilder:validation:Enum=Release;Acquire
	Group StepGroup `json:"group"`
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// +required
	Phase StepPhase `json:"phase"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the reason.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// +optional
	SubmittedAt *metav1.Time `json:"submittedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// DeployScheduleList is a list of DeploySchedules.
// +kubebuilder:object:root=true
type DeployScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeploySchedule `json:"items"`
}
