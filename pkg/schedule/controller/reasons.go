package controller

// Reasons written to TargetStatus.Reason, step reasons and Events. Terminal
// reasons end the target's transition for the current interval; each has a
// fix text in fixes.
const (
	ReasonConverged    = "Converged"
	ReasonObserveOnly  = "ObserveOnly"
	ReasonGateOff      = "GateOff"
	ReasonWaitRelease  = "WaitingForRelease"
	ReasonWaitAcquire  = "WaitingForAcquire"
	ReasonReleasing    = "Releasing"
	ReasonAcquiring    = "Acquiring"
	ReasonCapacityWait = "CapacityWait"
	ReasonSubmitted    = "Submitted"

	// Terminal.
	ReasonTargetOwned         = "TargetOwned"
	ReasonIneligible          = "Ineligible"
	ReasonQuotaRefused        = "QuotaRefused"
	ReasonAliasBlocked        = "AliasBlocked"
	ReasonStopTimeout         = "StopTimeout"
	ReasonCapacityUnavailable = "CapacityUnavailable"
	ReasonStartUnschedulable  = "StartUnschedulable"
	ReasonReadinessTimeout    = "ReadinessTimeout"
	ReasonDriftDetected       = "DriftDetected"
	ReasonTransitionAborted   = "TransitionAborted"
	ReasonInvalidSchedule     = "InvalidSchedule"
	ReasonBudgetRefused       = "BudgetRefused"
	// ReasonReservationBudgetRefused: preflight found that a Track H
	// target's replicas cannot fit the VRAM budget of its time-sliced
	// GPUReservation.
	ReasonReservationBudgetRefused = "ReservationBudgetRefused"

	// Events that are not phases.
	ReasonCapacityReduced = "CapacityReduced"
)

// Ineligible sub-reasons, written as "Ineligible{Sub}" in messages.
const (
	IneligibleNotFound                = "WorkloadNotFound"
	IneligibleDeleting                = "WorkloadDeleting"
	IneligibleUnsupportedKind         = "UnsupportedKind"
	IneligibleKindNotInstalled        = "KindNotInstalled"
	IneligibleUnsupportedScaleForMode = "UnsupportedScaleForMode"
	IneligibleInvalidConfig           = "InvalidConfig"
	IneligibleReservation             = "ReservationNotReady"
	IneligibleManagedByController     = "ManagedByController"
	IneligibleWorkloadFailed          = "WorkloadFailed"
)

// fixes is the human fix text for each terminal reason.
var fixes = map[string]string{
	ReasonTargetOwned: "Remove the target from one of the two schedules; the schedule created first keeps the workload.",
	ReasonIneligible:  "Fix the workload as the message says; the next pass re-checks it.",
	ReasonQuotaRefused: "Raise the namespace ResourceQuota for the device class, or lower the incoming target's replicas or devices; " +
		"nothing was released.",
	ReasonAliasBlocked: "Set allowDowntime: true on the window state (or defaultAllowDowntime on the target) to consent to the outage, " +
		"or remove the Service/alias; if the alias check itself failed, grant the controller list on services.",
	ReasonStopTimeout: "Find why the pods or their ResourceClaims are not going away (finalizers, a stuck node, the DRA driver) " +
		"and remove the cause; the next intent interval starts a new transition.",
	ReasonCapacityUnavailable: "Free GPUs in the pool (the preview message lists what is missing) or shrink the incoming target; " +
		"the released target was not restarted, use apply-now after fixing capacity.",
	ReasonStartUnschedulable: "Read the pods' PodScheduled condition for the scheduler's reason and fix that constraint.",
	ReasonReadinessTimeout:   "Check the pods' readiness probes and container logs; the started pods are kept, not stopped.",
	ReasonDriftDetected:      "The workload was changed by hand; restore it yourself or wait for the next intent interval.",
	ReasonTransitionAborted: "Another target of this transition failed its preflight (see its status); " +
		"fix it and request apply-now, or wait for the next interval.",
	ReasonInvalidSchedule: "Fix the schedule spec as the message says.",
	ReasonReservationBudgetRefused: "Lower the incoming target's replicas or its claims' memoryMiB, stop another member of the reservation " +
		"in the same transition, or give the reservation more GPUs; nothing was released, request apply-now once it fits.",
	ReasonBudgetRefused: "The cluster's budget hook refused what this transition would start (its message says why): " +
		"ask the budget's owner, or lower the incoming target's replicas or devices; if the hook could not be reached, fix it " +
		"(it fails closed). Nothing was released; request apply-now once it allows the transition.",
}

// fixFor returns the fix text of a terminal reason ("" if none).
func fixFor(reason string) string { return fixes[reason] }

// withFix appends the fix text of reason to message.
func withFix(reason, message string) string {
	if f := fixFor(reason); f != "" {
		return message + " Fix: " + f
	}
	return message
}
