package advisor

import (
	"time"
)

// Device is one GPU of the pool.
type Device struct {
	ID    string
	Node  string
	Model string
	// Holder is the key of the running workload that holds the device, or
	// "" when it is free.
	Holder string
}

// Tier is one way to satisfy a request: Count devices on one node out of
// Devices (the IDs the tier's class and selectors accept and its
// tolerations allow now).
type Tier struct {
	Name  string
	Model string
	Count int
	// Devices are the devices the tier may take now.
	Devices map[string]bool
	// Blocked are matching devices the tier may not take, with the reason
	// (a reservation it is not a member of, an unhealthy taint).
	Blocked map[string]string
}

// Request is one device request: the first tier that fits is granted.
type Request struct {
	Name  string
	Tiers []Tier
}

// Group is what must land on one node: a pod with its claims, joined with
// every pod that shares one of those claims.
type Group struct {
	Pods     []string
	Requests []Request
	// Nodes, when not empty, are the only nodes the group may use (a
	// nodeSelector, an allocated claim's node).
	Nodes []string
}

// Workload is a waiting pod or gang, or a running one that a plan may move:
// pods that share claims or a gang move whole.
type Workload struct {
	// Key names it: "namespace/pod" or "namespace/gang:<name>".
	Key       string
	Namespace string
	Priority  int32
	Groups    []Group
	// Held are the devices a running workload holds.
	Held []string
	// Budgets maps each PodDisruptionBudget ("namespace/name") that selects
	// some of its pods to how many of them it selects.
	Budgets map[string]int
	// Fixed, when set, says why the workload may be neither moved nor
	// evicted (not managed by Rota, terminating, ...).
	Fixed string
	// Pinned, when set, says why it cannot run elsewhere (a nodeSelector):
	// a plan may evict it but not move it.
	Pinned string
}

// Release is capacity that frees by itself at a known time: a
// DeploySchedule transition that scales workloads down, or a reservation
// window that ends.
type Release struct {
	At time.Time
	// Source says who releases: "DeploySchedule team-a/serving".
	Source string
	// Workloads are the keys of running workloads that stop.
	Workloads []string
	// Unblocks are devices that stop being blocked (a reservation ends).
	Unblocks []string
}

// Snapshot is the cluster as the advisor sees it.
type Snapshot struct {
	Devices []Device
	Running []Workload
	// Budgets maps a PodDisruptionBudget ("namespace/name") to how many
	// more disruptions it allows now.
	Budgets map[string]int
	// Limits maps a namespace to its per-model device limits; a namespace
	// or model without an entry is unlimited.
	Limits map[string]map[string]int
	// Releases are sorted by time, earliest first.
	Releases []Release
	// Models are the models of the pool's GPUs that a waiting claim's class
	// accepts, with their devices, for the tier option: a model not among
	// the claim's tiers that the owner could add.
	Models []Tier
}

// Kind is the kind of an option.
type Kind string

// The option kinds, in the order Advise lists them.
const (
	KindTier  Kind = "tier"
	KindQuota Kind = "quota"
	KindMove  Kind = "move"
	KindWait  Kind = "wait"
	KindNone  Kind = "none"
)

// Option is one way to admit the waiting workload.
type Option struct {
	Kind Kind `json:"kind"`
	// Summary is the option in one line for people.
	Summary string `json:"summary"`
	// At is when a wait ends.
	At *time.Time `json:"at,omitempty"`
	// Source is who frees capacity for a wait.
	Source string `json:"source,omitempty"`
	// Steps are the moves and evictions of a move plan, in order.
	Steps []Step `json:"steps,omitempty"`
	// GPUs are how many GPUs a move plan disturbs; MaxPriority is the
	// highest priority among the pods it disturbs; Tenants how many
	// namespaces it disturbs.
	GPUs        int   `json:"gpus,omitempty"`
	MaxPriority int32 `json:"maxPriority,omitempty"`
	Tenants     int   `json:"tenants,omitempty"`
	// Quota is the limit change of a quota option.
	Quota *QuotaChange `json:"quota,omitempty"`
	// Model is the model a tier option adds.
	Model string `json:"model,omitempty"`
	// Placement is where the waiting workload would land.
	Placement []Placed `json:"placement,omitempty"`
	// Constraints are, for none, what forbids each candidate placement.
	Constraints []string `json:"constraints,omitempty"`
}

// Step moves or evicts one running workload.
type Step struct {
	Action   string   `json:"action"` // "move" or "evict"
	Workload string   `json:"workload"`
	Pods     []string `json:"pods"`
	GPUs     int      `json:"gpus"`
	Model    string   `json:"model"`
	From     []string `json:"from"`
	// To are the nodes a move lands on; empty for an eviction.
	To []string `json:"to,omitempty"`
	// Why says why an eviction is not a move.
	Why string `json:"why,omitempty"`
	// Budget names the PodDisruptionBudget the step uses, with what it allows.
	Budget string `json:"budget,omitempty"`
}

// QuotaChange is a per-model limit change.
type QuotaChange struct {
	Namespace string `json:"namespace"`
	Model     string `json:"model"`
	From      int    `json:"from"`
	To        int    `json:"to"`
}

// Placed is where one group of the waiting workload would land.
type Placed struct {
	Pods    []string `json:"pods"`
	Node    string   `json:"node"`
	Devices []string `json:"devices"`
	Model   string   `json:"model"`
}

// Advice is the advisor's answer for one waiting workload.
type Advice struct {
	Workload string   `json:"workload"`
	Options  []Option `json:"options"`
	// Truncated is true when the search stopped at Options.MaxChecks: a
	// move plan disturbing fewer GPUs may exist, and none is not claimed.
	Truncated bool `json:"truncated,omitempty"`
	// Checks counts the placements tried.
	Checks int `json:"checks"`
}

// Options bound the search.
type Options struct {
	// MaxChecks bounds the placements the move search tries (0: 50,000).
	MaxChecks int
	// MaxPlans is how many move plans to return (0: 3).
	MaxPlans int
}
