package v1alpha1

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// DriverName is the DRA driver's name, the domain of its device attributes
// and the name of the DeviceClass the manifests install.
const DriverName = "gpu.rota.dev"

// CDIVendor is the vendor of the CDI specs the driver writes: devices are
// named k8s.gpu.rota.dev/claim=<claim UID>-<device>.
const CDIVendor = "k8s." + DriverName

// SandboxReportSchema identifies the JSON schema of rota-sandbox reports,
// which scripts and CI read.
const SandboxReportSchema = "rota.dev/sandbox-report/v1"

// DeviceClassName is the DeviceClass that selects every GPU of the driver.
const DeviceClassName = DriverName

// Device attributes and capacity the driver publishes for each GPU
// (docs/driver.md, "ResourceSlices"). They are qualified by DriverName in CEL
// (device.attributes["gpu.rota.dev"].model) and unqualified in the slice.
const (
	AttributeUUID                  resourceapi.QualifiedName = "uuid"
	AttributeProductName           resourceapi.QualifiedName = "productName"
	AttributeIndex                 resourceapi.QualifiedName = "index"
	AttributeModel                 resourceapi.QualifiedName = "model"
	AttributeArchitecture          resourceapi.QualifiedName = "architecture"
	AttributeCUDAComputeCapability resourceapi.QualifiedName = "cudaComputeCapability"
	AttributeDriverVersion         resourceapi.QualifiedName = "driverVersion"
	AttributeCUDADriverVersion     resourceapi.QualifiedName = "cudaDriverVersion"
	// CapacityMemory is the GPU's memory in bytes; consumable when the
	// driver runs with --consumable-memory.
	CapacityMemory resourceapi.QualifiedName = "memory"
)

// Device taint keys.
const (
	// UnhealthyTaintKey marks GPUs that NVML reports in trouble
	// (docs/driver.md, "Health").
	UnhealthyTaintKey = DriverName + "/unhealthy"
	// ReservedTaintKey marks GPUs a GPUReservation holds; its value is
	// ReservedTaintValue's <namespace>.<name> (docs/reservations.md).
	ReservedTaintKey = "rota.dev/reserved"
)

// ReservedTaintValue is the value of the ReservedTaintKey taint on the GPUs
// that the GPUReservation namespace/name holds: "<namespace>.<name>".
// Namespaces cannot contain dots, so the namespace part is unambiguous; the
// admission policy in manifests/admission relies on that.
func ReservedTaintValue(namespace, name string) string { return namespace + "." + name }

// ParseReservedTaintValue splits a ReservedTaintValue; ok is false for a
// malformed value.
func ParseReservedTaintValue(v string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(v, ".")
	if !ok || namespace == "" || name == "" {
		return "", "", false
	}
	return namespace, name, true
}

// Labels, annotations and the finalizer of GPUReservations.
const (
	// ReservationNamespaceLabel and ReservationNameLabel name the
	// GPUReservation that owns a DeviceTaintRule, DeviceClass or holder claim.
	ReservationNamespaceLabel = "rota.dev/reservation-namespace"
	ReservationNameLabel      = "rota.dev/reservation-name"
	// ReservationAnnotation on a pinned ResourceClaimTemplate names the
	// reservation whose GPUs it is pinned to.
	ReservationAnnotation = "rota.dev/reservation"
	// PurposeAnnotation says, for a person, why Rota created an object.
	PurposeAnnotation = "rota.dev/purpose"
	// ReservationClassSuffix ends the name of the DeviceClass a reservation
	// keeps for its held GPUs: <namespace>.<name>.reservation.rota.dev.
	ReservationClassSuffix = ".reservation.rota.dev"
	// ReservationFinalizer keeps a GPUReservation until its taints, class and
	// holder claim are gone.
	ReservationFinalizer = "rota.dev/reservation-holder"
)

// Annotations and labels of DeploySchedule targets (docs/schedule.md).
const (
	// TransitionKeyAnnotation records, on a workload, the idempotency key of
	// the last transition step applied to it.
	TransitionKeyAnnotation = "rota.dev/transition-key"
	// ReplicasBeforeStopAnnotation remembers the replicas a stop removed.
	ReplicasBeforeStopAnnotation = "rota.dev/replicas-before-stop"
	// AliasAnnotation declares that a workload is an alias of another, so a
	// swap would leave its users without a backend.
	AliasAnnotation = "rota.dev/alias"
	// ApplyNowAnnotation on a DeploySchedule asks for the current interval's
	// transition to run now.
	ApplyNowAnnotation = "rota.dev/apply-now"
	// PinnedFromLabel on a pinned ResourceClaimTemplate names the template it
	// was copied from.
	PinnedFromLabel = "rota.dev/pinned-from"
)

// What the scheduler reads from and writes on pods (docs/admission.md,
// docs/tiering.md).
const (
	// TierAnnotation is the tier (firstAvailable subrequest) a pod was
	// placed on; it travels on the Binding.
	TierAnnotation = "rota.dev/tier"
	// DevicesAnnotation lists the devices a tiered pod was placed on with
	// their UUIDs ("pool/device=UUID, ..."); it travels on the Binding.
	DevicesAnnotation = "rota.dev/devices"
	// PassedOverAnnotation carries, as JSON, the tiers preferred to the one
	// a pod was placed on and why each was not used (free, allocated,
	// tainted, reserved, excluded by node constraints); it travels on the
	// Binding.
	PassedOverAnnotation = "rota.dev/passed-over"
	// WaitDetailAnnotation carries, as JSON, the numbers behind a waiting
	// pod's rota.dev/Waiting condition (per tier: free, allocated,
	// reserved, tainted, other model) for `kubectl rota why`.
	WaitDetailAnnotation = "rota.dev/wait-detail"
	// AdviceAnnotation carries, as JSON, the unblock advice for a waiting
	// pod (pkg/advisor: the options that would admit it) for `kubectl rota
	// why` and the sandbox report; AdviceEventReason is the reason of the
	// Event emitted when the advice changes.
	AdviceAnnotation  = "rota.dev/advice"
	AdviceEventReason = "UnblockAdvice"
	// WaitingCondition is the pod condition with the reason a pod waits.
	WaitingCondition v1.PodConditionType = "rota.dev/Waiting"
	// GangLabel names a pod's gang; GangSizeAnnotation is how many pods the
	// gang needs before any of them is admitted.
	GangLabel          = "rota.dev/gang"
	GangSizeAnnotation = "rota.dev/gang-size"
)

// Admission marks (manifests/admission, docs/security.md).
const (
	// AdmissionLabel, with the value AdmissionChecked, is set by Rota's
	// parameter-free mutating policies on every pod that may get devices or
	// names rota-scheduler, and on every claim or claim template that
	// tolerates a reservation's taint. The validating policies that read the
	// cluster admin's parameter object bind only to objects with this mark,
	// so that object's absence refuses them and nothing else.
	AdmissionLabel   = "rota.dev/admission"
	AdmissionChecked = "checked"
)

// DeploySchedulesNamespaceLabel, set to DeploySchedulesEnabled on a
// namespace by the cluster admin, lets DeploySchedules be created there
// and the schedule controller write its workloads and claim templates
// (manifests/schedule-controller: rota-deployschedule-namespaces,
// rota-schedule-controller-writes). Tenants cannot label their namespace.
const (
	DeploySchedulesNamespaceLabel = "rota.dev/deploy-schedules"
	DeploySchedulesEnabled        = "enabled"
)

// Guarantees, borrowing and reclaim (docs/admission.md, "Guarantees,
// borrowing and reclaim").
const (
	// BorrowedAnnotation marks a pod that holds GPUs beyond its tenant's
	// GPUQuota guarantee: "<model>=<count>" (e.g. "H100=2"), written by the
	// scheduler before the pod binds and removed when it no longer borrows.
	// Only the scheduler may set, change or remove it
	// (manifests/admission: rota-borrower-mark).
	BorrowedAnnotation = "rota.dev/borrowed"
	// CheckpointAnnotation declares how a workload checkpoints before it is
	// evicted for a reclaim: "grace=<duration>[,http=<port><path>]", e.g.
	// "grace=90s,http=8080/checkpoint" (grace 1s to 1h, port 1 to 65535,
	// the path starting with "/"; pkg/evictor.ParseDeclaration). Rota asks
	// it to checkpoint (the CheckpointRequestedAnnotation, and an HTTP POST
	// to the pod's IP, port and path when given, with the JSON body
	// {"requested": <that value>, "deadline": <RFC 3339>, "tenant": <the
	// tenant the GPUs go back to>}), waits for the acknowledgement (a 2xx
	// answer to the POST, or the CheckpointedAnnotation) or the grace, then
	// evicts. Rota never execs into a pod: a sidecar in a pod with
	// shareProcessNamespace can turn the annotation into a signal. A pod
	// without the annotation, or with one that does not parse, is evicted
	// at once.
	CheckpointAnnotation = "rota.dev/checkpoint"
	// CheckpointRequestedAnnotation is the time (RFC 3339) Rota asked the pod
	// to checkpoint; a downward-API volume shows it inside the pod.
	CheckpointRequestedAnnotation = "rota.dev/checkpoint-requested"
	// CheckpointedAnnotation is the workload's acknowledgement: set to the
	// value of CheckpointRequestedAnnotation once its state is saved.
	CheckpointedAnnotation = "rota.dev/checkpointed"
	// ReclaimEventReason is the reason of the Event on a pod evicted to
	// give GPUs back to a tenant's guarantee; CheckpointEventReason of the
	// Event that says whether it acknowledged its checkpoint in time;
	// ReclaimingEventReason of the Event that a reclaim takes the pod (the
	// tenant it serves and the numbers), before its checkpoint;
	// ReclaimBlockedEventReason of the Event that the eviction did not
	// happen (a PodDisruptionBudget refused every try, or an API error).
	ReclaimEventReason        = "Reclaimed"
	CheckpointEventReason     = "Checkpoint"
	ReclaimingEventReason     = "Reclaiming"
	ReclaimBlockedEventReason = "ReclaimBlocked"
)

// ReclaimAnnotation carries, as JSON, the reclaim under way for a waiting
// pod (its victims and their checkpoint grace) for `kubectl rota why`;
// written by the scheduler.
const ReclaimAnnotation = "rota.dev/reclaim"
