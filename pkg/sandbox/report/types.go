// Package report is what a sandbox run reports: the cluster at each
// checkpoint, the schedule transitions, and whether the expectations held.
// The JSON form (rota-sandbox run --report json) is a stable schema,
// documented in docs/scenarios.md; fields are only ever added.
package report

import (
	"time"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// SchemaVersion identifies the JSON schema of Report.
const SchemaVersion = gpuv1.SandboxReportSchema

// Report is one run.
type Report struct {
	SchemaVersion string    `json:"schemaVersion"`
	Scenario      string    `json:"scenario"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	// WallSeconds is how long the run took in real time.
	WallSeconds float64 `json:"wallSeconds"`
	Nodes       []Node  `json:"nodes"`
	// Checkpoints are in time order.
	Checkpoints []Checkpoint `json:"checkpoints"`
	// Transitions are every schedule transition of the run, in time order.
	Transitions []Transition `json:"transitions"`
	// MaxGPUsInUse is the most GPUs allocated at once during the run.
	MaxGPUsInUse int `json:"maxGPUsInUse"`
	// Timeline is the path of the HTML timeline ("" if none was written).
	Timeline string `json:"timeline,omitempty"`
	// Passed: every checkpoint's expectations held.
	Passed bool `json:"passed"`
}

// Node is a simulated node and its GPUs.
type Node struct {
	Name    string `json:"name"`
	Profile string `json:"profile"`
	GPUs    []GPU  `json:"gpus"`
}

// GPU is one published device.
type GPU struct {
	Node  string `json:"node"`
	Name  string `json:"name"`
	UUID  string `json:"uuid"`
	Model string `json:"model"`
	// Taints are the device's taints as key=value:effect.
	Taints []string `json:"taints,omitempty"`
}

// Checkpoint is the cluster at one instant and the checks made there.
type Checkpoint struct {
	Name   string    `json:"name"`
	Time   time.Time `json:"time"`
	Offset string    `json:"offset"`
	// Pods are all pods, sorted by namespace/name.
	Pods []Pod `json:"pods"`
	// Targets are the DeploySchedule targets.
	Targets      []Target      `json:"targets"`
	Reservations []Reservation `json:"reservations"`
	// Quotas are the GPUQuotas' GuaranteesFit conditions.
	Quotas []Quota `json:"quotas,omitempty"`
	// Transitions are those that began since the previous checkpoint.
	Transitions []Transition `json:"transitions"`
	GPUsInUse   int          `json:"gpusInUse"`
	// Failures are the expectations that did not hold.
	Failures []string `json:"failures"`
	Passed   bool     `json:"passed"`
}

// Pod is one pod.
type Pod struct {
	// Name is namespace/name.
	Name string `json:"name"`
	// Workload is the owning Deployment (or ReplicaSet, Job...), else the pod.
	Workload string   `json:"workload"`
	Node     string   `json:"node,omitempty"`
	Phase    string   `json:"phase"`
	Ready    bool     `json:"ready"`
	Devices  []Device `json:"devices,omitempty"`
	// Waiting is set for a pod the scheduler has not placed.
	Waiting *Waiting `json:"waiting,omitempty"`
	// Annotations are the pod's rota.dev/ annotations but the advice (in
	// Waiting), e.g. rota.dev/borrowed and rota.dev/checkpoint-requested.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Device is a GPU allocated to a pod's claim.
type Device struct {
	Node  string `json:"node"`
	Name  string `json:"name"`
	UUID  string `json:"uuid"`
	Model string `json:"model"`
	Claim string `json:"claim"`
}

// Waiting is why a pod is not placed: its PodScheduled condition, and
// Rota's reason code from its rota.dev/Waiting condition.
type Waiting struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Code is Rota's wait reason code (docs/operations.md), "" until
	// Rota's scheduler has classified the wait.
	Code string `json:"code,omitempty"`
	// Advice are the options that would admit the pod, as the scheduler's
	// unblock advisor last wrote them (its rota.dev/advice annotation),
	// in its order (docs/admission.md, "Unblock advice").
	Advice []advisor.Option `json:"advice,omitempty"`
}

// Target is one DeploySchedule target's status.
type Target struct {
	Schedule     string `json:"schedule"`
	Target       string `json:"target"`
	Phase        string `json:"phase"`
	Reason       string `json:"reason,omitempty"`
	Message      string `json:"message,omitempty"`
	DesiredState string `json:"desiredState,omitempty"`
	// Source is the window (or "default") the desired state comes from.
	Source string `json:"source,omitempty"`
}

// Reservation is one GPUReservation's status.
type Reservation struct {
	Name           string `json:"name"`
	Phase          string `json:"phase"`
	GPUs           int32  `json:"gpus"`
	BudgetUsedMiB  int64  `json:"budgetUsedMiB"`
	BudgetTotalMiB int64  `json:"budgetTotalMiB"`
}

// Quota is one GPUQuota's GuaranteesFit condition.
type Quota struct {
	Name string `json:"name"`
	// GuaranteesFit is the condition's status ("" before the controller
	// has written one).
	GuaranteesFit string `json:"guaranteesFit,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
}

// Transition is the set of steps a schedule executed for one intent
// interval (the boundary At).
type Transition struct {
	Schedule string    `json:"schedule"`
	At       time.Time `json:"at"`
	Steps    []Step    `json:"steps"`
}

// Step is one release or acquire step.
type Step struct {
	Target string `json:"target"`
	// Group is Release or Acquire; a transition lists releases first.
	Group       string     `json:"group"`
	Action      string     `json:"action"`
	Replicas    *int32     `json:"replicas,omitempty"`
	Phase       string     `json:"phase"`
	Reason      string     `json:"reason,omitempty"`
	SubmittedAt *time.Time `json:"submittedAt,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
}
