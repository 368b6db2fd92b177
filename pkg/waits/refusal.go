package waits

// Refusal is an admission plugin's answer to a pod, as data: the wait
// reason it makes and the words users read. A refusing plugin records it in
// the scheduling cycle's state (pkg/plugins/cyclestate.Refuse) next to the
// status it returns, and the WaitReason plugin classifies from the record,
// never from the status text, so rewording a message cannot change a
// reason.
type Refusal struct {
	// Reason is the wait reason the refusal makes: QuotaExceeded,
	// ReservationOvercommitted, Reserved (the pod reaches for a
	// reservation's GPUs it may not use), GangIncomplete or NotAttempted (it
	// waits its turn behind another tenant's pod).
	Reason Reason
	// Message is what users read in the wait, without the reason.
	Message string
}

// Cause says what keeps a pod out when its reason alone does not: a wait
// for capacity that freed devices would not end. The WaitReason plugin
// records it in Causes for the other plugins (Fairness), which read it as
// data rather than from the condition's message, and writes it in the
// rota.dev/wait-detail annotation for users.
type Cause string

const (
	// CauseConstraintConflict: no placement can exist while pods that must
	// keep running (a PodDisruptionBudget) stay where they are.
	CauseConstraintConflict Cause = "ConstraintConflict"
	// CauseNodesRejected: the devices would do on some nodes, but other
	// plugins rejected those nodes (CPU, affinity, a reservation's node).
	CauseNodesRejected Cause = "NodesRejected"
	// CauseRefusedByReservation: the Reservation plugin refused the pod
	// for reaching for a reservation's GPUs it may not use.
	CauseRefusedByReservation Cause = "RefusedByReservation"
)

// Admit adds a plugin's refusal to the attempt, by its reason, and reports
// whether the reason is an admission answer the classifier knows; false
// leaves the attempt as it was (the caller counts the status as a
// rejection of the node).
func (a *Attempt) Admit(r Refusal) bool {
	switch r.Reason {
	case QuotaExceeded:
		a.Quota = r.Message
	case ReservationOvercommitted:
		a.Reservation = r.Message
	case Reserved:
		a.NotMember = r.Message
	case GangIncomplete:
		a.Gang = r.Message
	case NotAttempted:
		a.Turn = r.Message
	default:
		return false
	}
	return true
}
