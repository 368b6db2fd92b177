package forecast

import (
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/preview"
)

// Reasons of an over-committed window.
const (
	// ReasonCount: some pod finds too few free GPUs, on every node
	// together, of any model its claims accept.
	ReasonCount = preview.ShortageCount
	// ReasonFragmentation: the pool has enough free GPUs for every pod's
	// claims, but no single node has them for some pod.
	ReasonFragmentation = preview.ShortageFragmentation
)

// Load is a workload whose pods ask for GPUs: a schedule's target, or a
// workload no schedule touches (always running).
type Load struct {
	// Name is "namespace/schedule/target" for a target and
	// "namespace/Kind/name" for a workload no schedule touches.
	Name string
	// Replica is what one replica runs: per pod template, its claim specs
	// and how many pods one replica makes from it.
	Replica []preview.Demand
	// Replicas is how many replicas run when nothing pins the count (an
	// always-running workload, or a target whose intent is not pinned).
	Replicas int32
	// Namespace is the workload's, for its ResourceQuotas.
	Namespace string
	// Alias names what makes the workload serve an alias ("Service chat"),
	// "" when nothing does: stopping it then needs allowDowntime.
	Alias string
}

// Schedule is one compiled DeploySchedule with the loads of its targets.
type Schedule struct {
	Namespace, Name string
	Compiled        *schedule.Schedule
	// Targets maps a target name to its load. A target without one (its
	// workload asks for no GPU) adds no demand.
	Targets map[string]*Load
}

// Key is "namespace/name".
func (s *Schedule) Key() string { return s.Namespace + "/" + s.Name }

// Input is everything a forecast reads.
type Input struct {
	From, To  time.Time
	Schedules []Schedule
	// Always are loads that run the whole range (no schedule touches them).
	Always []Load
	// Nodes are the pool's nodes; unschedulable ones are left out of packing.
	Nodes []*v1.Node
	// Slices are the published ResourceSlices, less the GPUs that
	// reservations hold (see WithoutDevices).
	Slices  []*resourceapi.ResourceSlice
	Classes []*resourceapi.DeviceClass
	// Quotas are the ResourceQuotas of the schedules' namespaces.
	Quotas []*v1.ResourceQuota
	// Notes say what was left out while gathering the input; Run passes
	// them on.
	Notes []string
	// Allocated are claims already holding devices that stay held over the
	// range (pods no schedule touches).
	Allocated []*resourceapi.ResourceClaim
}

// Forecast is the answer.
type Forecast struct {
	From, To time.Time
	// Models are the GPU models of the pool and of the demand, sorted.
	Models []string
	// Capacity is the healthy, unreserved GPUs per model.
	Capacity map[string]int
	// Nodes is the healthy, unreserved GPUs per node and model.
	Nodes map[string]map[string]int
	// Segments tile [From, To): stretches where no load changes replicas.
	Segments []Segment
	// Overcommits are the over-committed windows, in time order.
	Overcommits []Overcommit
	// Fallbacks are the stretches where a load runs on a fallback model,
	// neighbouring stretches of the same load, model and GPUs merged.
	Fallbacks []FallbackWindow
	// Transitions are every schedule's transitions in the range, in time
	// order, with their peak per model.
	Transitions []Transition
	// Uses are the models each load's pods take GPUs of, by load name:
	// their first choice and every model they are placed on.
	Uses map[string]map[string]bool
	// Windows are the schedule windows active in the range (for drawing).
	Windows []Window
	// Warnings are the refusals the controller will make at transitions
	// (AliasBlocked, QuotaRefused), in time order.
	Warnings []Warning
	// Notes say what the forecast could not count (a claim no device
	// matches).
	Notes []string
}

// Segment is a stretch of constant demand.
type Segment struct {
	From, To time.Time
	// Demand is the GPUs per model: those the pods are placed on (the
	// scheduler's choice, fallback tiers included), the allocated
	// claims', and, for a pod that finds no node, its first choice.
	Demand map[string]int
	// Running are the loads with their replicas (> 0), by name.
	Running map[string]int32
	// Loads are Demand per load and model, the allocated claims left out.
	Loads map[string]map[string]int
	// Nodes are the GPUs per node and model where the pods are placed,
	// with the allocated claims; nil when some pod finds no node.
	Nodes map[string]map[string]int
	// Fallbacks are the loads with GPUs of a model other than their first
	// choice, by load name and model.
	Fallbacks []Fallback
	// Unplaced are the loads with pods that find no node.
	Unplaced []Unplaced
}

// Fallback is a load's GPUs on a model it accepts but does not prefer: a
// later firstAvailable tier, or, for a request that several models
// satisfy, a model other than the one most matching GPUs of the pool have.
type Fallback struct {
	Load string
	// Model is where the GPUs are, Preferred the load's first choice.
	Model, Preferred string
	// Tier is the subrequest that got them, "2/2 a100" ("" for a request
	// without alternatives).
	Tier string
	GPUs int
}

// Unplaced is a load's pods that find no node in a stretch.
type Unplaced struct {
	Load string
	Pods int
	// GPUs are what the pods ask for, per model of first choice.
	GPUs map[string]int
	// Reason is ReasonCount when some request has too few free GPUs of
	// every model it accepts, else ReasonFragmentation.
	Reason string
	// Detail gives the free GPUs per node once the other pods are placed.
	Detail string
}

// Overcommit is one window where demand exceeds what the pool can give.
type Overcommit struct {
	Model            string
	From, To         time.Time
	Demand, Capacity int
	// Targets are the schedule targets with demand on Model in the window
	// ("ns/schedule/target"); Others the always-running loads.
	Targets, Others []string
	Reason          string
	// Detail explains a fragmentation: the pod that found no node and the
	// free GPUs per node.
	Detail string
}

// FallbackWindow is a Fallback over [From, To).
type FallbackWindow struct {
	From, To time.Time
	Fallback
	// Target is true for a schedule's target, false for a workload no
	// schedule touches.
	Target bool
}

// Transition is one schedule's transition and the demand while it runs.
type Transition struct {
	Schedule string
	At       time.Time
	Steps    []schedule.Step
	// Before, Peak and After are the demand per model (of the models the
	// transition's targets use) before the first step, at its highest
	// while the steps run in order, and after the last. Other schedules
	// changing at the same instant count at the larger of their before
	// and after replicas, since their steps may run first.
	Before, Peak, After map[string]int
	// Over are the models whose Peak exceeds capacity.
	Over []string
}

// Window is a schedule window active over [From, To).
type Window struct {
	Schedule, Name string
	From, To       time.Time
}
