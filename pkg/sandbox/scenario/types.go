package scenario

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Scenario is one sandbox run, read from YAML (docs/scenarios.md).
type Scenario struct {
	// Name identifies the scenario in reports.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Start is the virtual time the run begins at (RFC 3339).
	Start time.Time `json:"start"`
	// End is when the run stops, after Start; the last event when unset.
	End *Offset `json:"end,omitempty"`
	// Kubelet sets the simulated kubelets' delays.
	Kubelet KubeletTiming `json:"kubelet,omitempty"`
	// PassPeriod is the schedule controller's re-evaluation period
	// (default 6h: boundaries are scheduled exactly anyway).
	PassPeriod *Offset `json:"passPeriod,omitempty"`
	Nodes      []Node  `json:"nodes"`
	Events     []Event `json:"events"`

	// SchedulerPluginArgs replace, for this run, the args of the named
	// plugins in the shipped rota-scheduler profile
	// (manifests/scheduler/config.yaml), e.g. Quota tenants. Keys are
	// plugin names that have a pluginConfig entry in that profile.
	SchedulerPluginArgs map[string]any `json:"schedulerPluginArgs,omitempty"`

	// Dir is the directory of the scenario file; applyFile is relative to it.
	Dir string `json:"-"`
}

// KubeletTiming are the simulated kubelets' delays.
type KubeletTiming struct {
	// StartDelay: bound → Running. Default 5s.
	StartDelay *Offset `json:"startDelay,omitempty"`
	// ReadyDelay: Running → Ready. Default 10s.
	ReadyDelay *Offset `json:"readyDelay,omitempty"`
	// MaxGracePeriod caps a deleted pod's grace period. Default 30s.
	MaxGracePeriod *Offset `json:"maxGracePeriod,omitempty"`
}

// Node is one simulated node and its mock NVML profile.
type Node struct {
	Name    string `json:"name"`
	Profile string `json:"profile"`
	// ConsumableMemory runs the node's driver with --consumable-memory:
	// each GPU may be shared by time-sliced claims that ask for part of its
	// memory (a GPUReservation in TimeSliced mode needs it). Default false:
	// one claim per GPU.
	ConsumableMemory bool `json:"consumableMemory,omitempty"`
}

// Event is one thing that happens at At; exactly one of the action fields
// is set.
type Event struct {
	At Offset `json:"at"`
	// Apply are Kubernetes objects applied (server-side apply) in order.
	Apply []unstructured.Unstructured `json:"apply,omitempty"`
	// ApplyFile is a YAML file of objects, relative to the scenario.
	ApplyFile string `json:"applyFile,omitempty"`
	// Delete removes objects.
	Delete []ObjectRef `json:"delete,omitempty"`
	// Fault makes a GPU fail in its node's mock NVML.
	Fault *Fault `json:"fault,omitempty"`
	// Recover clears a GPU's faults.
	Recover *GPURef `json:"recover,omitempty"`
	// Checkpoint reports the cluster and checks expectations.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

// ObjectRef names an object to delete.
type ObjectRef struct {
	// APIVersion defaults to v1.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// GracePeriodSeconds overrides the object's grace period.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// GPURef is one GPU of a node by index (gpu-<index>).
type GPURef struct {
	Node string `json:"node"`
	GPU  int    `json:"gpu"`
}

// Fault is an XID error on a GPU; 79 (fallen off the bus) by default.
type Fault struct {
	GPURef `json:",inline"`
	XID    uint64 `json:"xid,omitempty"`
}

// Checkpoint is a named report with expectations.
type Checkpoint struct {
	Name   string `json:"name"`
	Expect Expect `json:"expect,omitempty"`
}

// Expect are the checks of a checkpoint; all must hold.
type Expect struct {
	Pods         []PodExpect         `json:"pods,omitempty"`
	Targets      []TargetExpect      `json:"targets,omitempty"`
	Reservations []ReservationExpect `json:"reservations,omitempty"`
	Quotas       []QuotaExpect       `json:"quotas,omitempty"`
	// Transitions is the number of schedule transitions since the start.
	Transitions *int `json:"transitions,omitempty"`
	// MaxGPUsInUse bounds the GPUs allocated at any sample since the start.
	MaxGPUsInUse *int `json:"maxGPUsInUse,omitempty"`
	// MinReady are workloads that must have had at least Count Ready pods
	// at every sample since the previous checkpoint (since the start for
	// the first): no downtime.
	MinReady []ReadyExpect `json:"minReady,omitempty"`
	// Events are Events that must have been recorded about a pod by now,
	// whether the pod still exists or not.
	Events []EventExpect `json:"events,omitempty"`
}

// EventExpect is an Event about a pod: at least one Event regarding the
// pod Pod (namespace/name) with reason Reason whose message contains
// MessageContains.
type EventExpect struct {
	Pod             string `json:"pod"`
	Reason          string `json:"reason"`
	MessageContains string `json:"messageContains,omitempty"`
}

// ReadyExpect is a lower bound on a workload's Ready pods.
type ReadyExpect struct {
	// Workload is namespace/name of the owning Deployment (or the pod's
	// owner, or the pod), as the report's pods[].workload says.
	Workload string `json:"workload"`
	Count    int    `json:"count"`
}

// PodExpect checks the pods whose namespace/name matches Name (a glob:
// "serving/md-llama70b-*").
type PodExpect struct {
	Name string `json:"name"`
	// Count is how many pods match; at least one when unset.
	Count *int `json:"count,omitempty"`
	// Phase, Node and Model must hold for every matching pod ("" = any);
	// Model is the model of every device the pod holds.
	Phase string `json:"phase,omitempty"`
	Node  string `json:"node,omitempty"`
	Model string `json:"model,omitempty"`
	// GPUs is the number of devices each pod holds.
	GPUs *int `json:"gpus,omitempty"`
	// Waiting: the pod is not scheduled; ReasonContains is looked for in its
	// reason code and message.
	Waiting        bool   `json:"waiting,omitempty"`
	ReasonContains string `json:"reasonContains,omitempty"`
	// WaitReason is Rota's reason code the pod waits with (its
	// rota.dev/Waiting condition), e.g. TopologyFragmentation.
	WaitReason string `json:"waitReason,omitempty"`
	// AdviceContains is looked for in the pod's unblock advice, each
	// option as "<kind>: <summary>" (e.g. "none: ", "evict team-a/a-2").
	AdviceContains string `json:"adviceContains,omitempty"`
	// Annotations must hold for every matching pod: each key's value
	// matches the glob, or, for "", the pod has no such annotation (e.g.
	// {rota.dev/borrowed: "H100=2"}, {rota.dev/borrowed: ""}).
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TargetExpect checks one DeploySchedule target.
type TargetExpect struct {
	// Schedule is namespace/name.
	Schedule string `json:"schedule"`
	Target   string `json:"target"`
	Phase    string `json:"phase,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// QuotaExpect checks one GPUQuota's GuaranteesFit condition, as the
// GPUQuota status controller wrote it.
type QuotaExpect struct {
	// Name is the GPUQuota's, its tenant's namespace.
	Name string `json:"name"`
	// GuaranteesFit is the condition's status: True, False or Unknown.
	GuaranteesFit string `json:"guaranteesFit,omitempty"`
	// Reason is the condition's reason (Fits, ExceedPool, InvalidSpec).
	Reason          string `json:"reason,omitempty"`
	MessageContains string `json:"messageContains,omitempty"`
}

// ReservationExpect checks one GPUReservation (namespace/name).
type ReservationExpect struct {
	Name  string `json:"name"`
	Phase string `json:"phase,omitempty"`
	// MaxBudgetUsedMiB bounds the members' memory.
	MaxBudgetUsedMiB *int64 `json:"maxBudgetUsedMiB,omitempty"`
}
