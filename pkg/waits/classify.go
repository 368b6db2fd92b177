package waits

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// TierCounts is what the pool offers one tier of one request, node by node.
type TierCounts struct {
	// Label names the tier in messages: "tier 1/2 h100" or "request gpu".
	Label string
	// Request is the request's name when the pod has several, Tier the
	// tier's rank "1/2" (empty for a request without alternatives), Name
	// the model of its matching GPUs, else the (sub)request's name.
	Request, Tier, Name string
	// OtherModel counts the pool's GPUs of another model than the tier's.
	OtherModel int
	// Unmet counts, per selector, GPUs of the tier's model the selector
	// rejects (driver version, memory, ...).
	Unmet map[string]int
	// Need is how many devices the tier needs on one node.
	Need int
	// Matching counts every device the tier's selectors accept, per node.
	Matching map[string]int
	// Free counts the matching devices a new claim could take, per node.
	Free map[string]int
	// Tainted counts matching devices, not allocated, that a taint other
	// than a reservation's blocks (the driver's unhealthy taint), per node.
	Tainted map[string]int
	// Reserved counts matching devices, not allocated, that only a
	// GPUReservation's taint keeps the pod off, per node: the pod is not a
	// member, so its claims do not tolerate the reservation.
	Reserved map[string]int
	// Reservations counts the Reserved devices per reservation, by its
	// "namespace/name" for the waiting pod's namespace, and under
	// OtherNamespaces for every other's: a tenant learns that GPUs are
	// reserved elsewhere, not by whom.
	Reservations map[string]int
	// Preemptible counts matching devices held only by pods of lower
	// priority than the waiting pod that no disruption budget protects.
	Preemptible map[string]int
	// Pinned counts matching devices held by pods that must keep running
	// (a PodDisruptionBudget allows no disruption).
	Pinned map[string]int
}

// Attempt is what one failed scheduling attempt of a pod tells the
// classifier: the device counts of its requests and what other plugins said.
type Attempt struct {
	// Requests holds, per request still to allocate, its tiers in order.
	Requests [][]TierCounts
	// Quota is the quota plugin's message when it rejected the pod.
	Quota string
	// Reservation is the reservation plugin's message when it rejected the
	// pod for a VRAM budget.
	Reservation string
	// NotMember is the reservation plugin's message when it refused the
	// pod for reaching for a reservation's GPUs it may not use: a claim
	// tolerates a reservation the pod is not a member of, or a member's
	// claim does not tolerate its own.
	NotMember string
	// Gang is the gang plugin's message when the pod's gang is incomplete.
	Gang string
	// Turn is the fairness plugin's message when the pod waits its turn
	// behind another tenant's pod.
	Turn string
	// Rejections maps a node to "Plugin: reason" for nodes whose devices
	// would do but that a plugin rejected; the classifier names them when
	// nothing else explains the wait.
	Rejections map[string]string
	// DeviceConstraintNodes are nodes with enough free devices that
	// DynamicResources rejected (the claim's constraints, such as
	// matchAttribute, cannot be met there together).
	DeviceConstraintNodes []string
}

// Verdict is the classification of a wait.
type Verdict struct {
	Reason  Reason
	Message string
	// Unresolvable is true when no placement can exist while pods that
	// must keep running (PodDisruptionBudget) stay where they are: a
	// constraint conflict, not a wait for capacity.
	Unresolvable bool
	// Detail is the structured form `kubectl rota why` prints.
	Detail Detail
}

type tierState int

const (
	stateFits tierState = iota
	stateFragmented
	stateUnhealthy
	stateReserved
	stateInsufficient
)

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// largest returns the node with the most in m (ties: first by name) and the count.
func largest(m map[string]int) (string, int) {
	best, n := "", 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > n {
			best, n = k, m[k]
		}
	}
	return best, n
}

// spread renders "n1: 1, n2: 1" for the nodes with a non-zero count.
func spread(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (t TierCounts) state() tierState {
	for _, n := range t.Free {
		if n >= t.Need {
			return stateFits
		}
	}
	free, tainted := sum(t.Free), sum(t.Tainted)
	switch {
	case free >= t.Need:
		return stateFragmented
	case free+tainted >= t.Need:
		// Unhealthy GPUs decide when they alone make up the difference:
		// the pod gets them once they heal, whoever holds a reservation.
		return stateUnhealthy
	case free+tainted+sum(t.Reserved) >= t.Need:
		return stateReserved
	default:
		return stateInsufficient
	}
}

// best returns the tier of a request that comes closest to fitting, the
// first such tier on equal states.
func best(tiers []TierCounts) (TierCounts, tierState) {
	var bt TierCounts
	bs := stateInsufficient + 1
	for _, t := range tiers {
		if s := t.state(); s < bs {
			bt, bs = t, s
		}
	}
	return bt, bs
}

func gpus(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// Classify turns an attempt into one reason with a message that carries
// numbers. Admission answers come first (quota, reservation budget, gang,
// a fair-queue turn), then the pool: the request furthest from fitting decides.
func Classify(a Attempt) Verdict {
	switch {
	case a.Quota != "":
		return admission(QuotaExceeded, a.Quota)
	case a.Reservation != "":
		return admission(ReservationOvercommitted, a.Reservation)
	case a.NotMember != "":
		v := admission(Reserved, RefusedByReservation+": "+a.NotMember)
		v.Detail.Cause = CauseRefusedByReservation
		return v
	case a.Gang != "":
		return admission(GangIncomplete, a.Gang)
	case a.Turn != "":
		return admission(NotAttempted, a.Turn)
	}
	v := classifyPool(a)
	for _, tiers := range a.Requests {
		for _, t := range tiers {
			st := t.Stat()
			if len(a.Requests) == 1 {
				st.Request = ""
			}
			v.Detail.Tiers = append(v.Detail.Tiers, st)
		}
	}
	return v
}

// admission is the verdict of an admission answer: its message says it all.
func admission(r Reason, msg string) Verdict {
	return Verdict{Reason: r, Message: msg, Detail: Detail{Headline: msg}}
}

// classifyPool classifies a wait for devices: the request furthest from
// fitting decides.
func classifyPool(a Attempt) Verdict {
	var worst TierCounts
	var worstTiers []TierCounts
	worstState := tierState(-1)
	for _, tiers := range a.Requests {
		if len(tiers) == 0 {
			continue
		}
		t, s := best(tiers)
		if s > worstState {
			worst, worstState, worstTiers = t, s, tiers
		}
	}
	if worstState < 0 {
		return nodeVerdict(a, "the pod asks for no devices")
	}
	v := poolVerdict(a, worst, worstState)
	if worstState != stateFits {
		v.Detail.Headline = headline(worstTiers)
	}
	if v.Unresolvable {
		v.Detail.Headline = ConstraintConflict + ": " + v.Detail.Headline
		v.Detail.Cause = CauseConstraintConflict
	}
	return v
}

// poolVerdict explains tier t, the best tier of the request furthest from
// fitting, in state s.
func poolVerdict(a Attempt, t TierCounts, s tierState) Verdict {
	free := sum(t.Free)
	switch s {
	case stateInsufficient:
		msg := fmt.Sprintf("%s: needs %s, %d free in the pool (%s) of %d matching", t.Label, gpus(t.Need), free, spread(t.Free), sum(t.Matching))
		if tainted := sum(t.Tainted); tainted > 0 {
			msg += fmt.Sprintf(", %d tainted unhealthy", tainted)
		}
		if reserved := sum(t.Reserved); reserved > 0 {
			msg += fmt.Sprintf(", %d reserved by %s", reserved, reservations(t))
		}
		return withPreemption(Verdict{Reason: InsufficientCapacity, Message: msg}, t)
	case stateUnhealthy:
		return Verdict{Reason: Unhealthy, Message: fmt.Sprintf("%s: needs %s, %d free and %d more matching but tainted unhealthy (%s)",
			t.Label, gpus(t.Need), free, sum(t.Tainted), spread(t.Tainted)),
			Detail: Detail{Notes: []string{fmt.Sprintf("%d %s tainted unhealthy (%s): the pod waits for them to heal", sum(t.Tainted), t.name(), spread(t.Tainted))}}}
	case stateReserved:
		return reservedVerdict(t)
	case stateFragmented:
		node, block := largest(t.Free)
		msg := fmt.Sprintf("%s: needs %s on one node; %d free in the pool but spread (%s), largest free block %d on %s",
			t.Label, gpus(t.Need), free, spread(t.Free), block, node)
		return withPreemption(Verdict{Reason: TopologyFragmentation, Message: msg}, t)
	}
	// Some node has the devices free: another constraint decides.
	if len(a.DeviceConstraintNodes) > 0 {
		nodes := append([]string(nil), a.DeviceConstraintNodes...)
		sort.Strings(nodes)
		msg := fmt.Sprintf("%s: %d free (%s) but the claim's constraints cannot be met together on %s",
			t.Label, free, spread(t.Free), strings.Join(nodes, ", "))
		return Verdict{Reason: TopologyFragmentation, Message: msg, Detail: Detail{Headline: fmt.Sprintf(
			"unmet constraint: %s has %d free on %s, but the claim's constraints (such as same model) cannot be met together there",
			t.name(), free, strings.Join(nodes, ", "))}}
	}
	return nodeVerdict(a, fmt.Sprintf("%s: %d free (%s)", t.Label, free, spread(t.Free)))
}

// ConstraintConflict starts the message of a wait no placement can end
// while pods that must keep running stay where they are.
const ConstraintConflict = "constraint conflict, no placement exists"

// RefusedByReservation starts the message of a pod the Reservation plugin
// refused for reaching for a reservation's GPUs it may not use: no device
// freed anywhere lets it in.
const RefusedByReservation = "refused by the Reservation plugin"

// NodesRejected is said of a pod whose devices would do on some node but
// that other plugins rejected there (not a reservation member, CPU, ...).
const NodesRejected = "those nodes are rejected"

// nodeVerdict explains a wait where the devices would do but the nodes
// that hold them were rejected for other reasons (CPU, affinity, ...).
func nodeVerdict(a Attempt, devices string) Verdict {
	if len(a.Rejections) == 0 {
		msg := devices + "; the devices were taken or changed during the attempt"
		return Verdict{Reason: InsufficientCapacity, Message: msg, Detail: Detail{Headline: msg}}
	}
	nodes := make([]string, 0, len(a.Rejections))
	for n := range a.Rejections {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		parts = append(parts, n+": "+a.Rejections[n])
	}
	msg := devices + " but " + NodesRejected + " (" + strings.Join(parts, "; ") + ")"
	return Verdict{Reason: InsufficientCapacity, Message: msg, Detail: Detail{Headline: msg, Cause: CauseNodesRejected}}
}

// withPreemption adds what evicting work could and could not achieve.
// Rota never implies that it will evict anything.
func withPreemption(v Verdict, t TierCounts) Verdict {
	possible := map[string]int{}
	reachable := map[string]int{}
	for node, m := range t.Matching {
		possible[node] = m - t.Pinned[node] - t.Tainted[node] - t.Reserved[node]
		reachable[node] = t.Free[node] + t.Preemptible[node]
	}
	if pNode, pBlock := largest(possible); pBlock < t.Need && sum(t.Pinned) > 0 {
		v.Unresolvable = true
		pinned := fmt.Sprintf("pods that must keep running (PodDisruptionBudget) hold %d of the matching GPUs (%s), so the largest block any node could offer is %d on %s",
			sum(t.Pinned), spread(t.Pinned), pBlock, orNone(pNode))
		v.Message = fmt.Sprintf("%s: %s; %s", ConstraintConflict, v.Message, pinned)
		v.Detail.Notes = append(v.Detail.Notes, pinned)
		return v
	}
	var note string
	switch rNode, rBlock := largest(reachable); {
	case rBlock == 0:
		note = "preemption would not help: no lower-priority pod holds a matching GPU"
	case rBlock < t.Need:
		note = fmt.Sprintf("preemption would not help: evicting every lower-priority pod leaves at most %d free on one node (%s)", rBlock, rNode)
	default:
		note = fmt.Sprintf("evicting lower-priority pods could free %d on %s, but Rota evicts only where a priority policy allows", rBlock, rNode)
	}
	v.Message += "; " + note
	v.Detail.Notes = append(v.Detail.Notes, note)
	return v
}

func orNone(s string) string {
	if s == "" {
		return "no node"
	}
	return s
}
