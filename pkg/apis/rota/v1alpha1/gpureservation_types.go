package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReservationMode says how members share the reserved GPUs.
// +kubebuilder:validation:Enum=Exclusive;TimeSliced
type ReservationMode string

const (
	// ReservationExclusive gives each reserved GPU to one member claim at a time.
	ReservationExclusive ReservationMode = "Exclusive"
	// ReservationTimeSliced lets members share each GPU under a VRAM budget.
	ReservationTimeSliced ReservationMode = "TimeSliced"
)

// ReservationPhase is the life-cycle phase of a GPUReservation.
// +kubebuilder:validation:Enum=Pending;Bound;Degraded;Releasing
type ReservationPhase string

// Reservation phases.
const (
	// ReservationPending: the GPUs are not (yet) held, see the conditions.
	ReservationPending ReservationPhase = "Pending"
	// ReservationBound: every requested GPU is held and healthy.
	ReservationBound ReservationPhase = "Bound"
	// ReservationDegraded: GPUs are held but at least one is unhealthy.
	ReservationDegraded ReservationPhase = "Degraded"
	// ReservationReleasing: the reservation is being deleted.
	ReservationReleasing ReservationPhase = "Releasing"
)

// GPUReservation holds specific GPUs of one node for the named workloads of its
// namespace. Non-members never land on them, even while they are idle.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gpures,categories=rota
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.status.gpuCount`
// +kubebuilder:printcolumn:name="Budget MiB",type=integer,JSONPath=`.status.budgetMiBPerGPU`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GPUReservation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec GPUReservationSpec `json:"spec"`
	// +optional
	Status GPUReservationStatus `json:"status,omitempty"`
}

// GPUReservationSpec names the node, which GPUs and who may use them.
//
// +kubebuilder:validation:XValidation:rule="has(self.count) != has(self.deviceUUIDs)",message="exactly one of count or deviceUUIDs must be set"
// +kubebuilder:validation:XValidation:rule="self.nodeName == oldSelf.nodeName",message="nodeName is immutable; create a new reservation to move",fieldPath=".nodeName"
type GPUReservationSpec struct {
	// NodeName is the node whose GPUs are held.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`

	// Count asks for this many GPUs of the node, chosen deterministically.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Count *int32 `json:"count,omitempty"`

	// DeviceUUIDs asks for these GPUs by UUID.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=64
	DeviceUUIDs []string `json:"deviceUUIDs,omitempty"`

	// Mode is Exclusive (default) or TimeSliced.
	// +optional
	// +kubebuilder:default=Exclusive
	Mode ReservationMode `json:"mode,omitempty"`

	// Headroom is the share of each GPU's memory members may budget, a decimal
	// in (0, 1] with up to four places. Default "0.95".
	// +optional
	// +kubebuilder:default="0.95"
	// +kubebuilder:validation:MaxLength=6
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0\\\\.[0-9]{1,4}|1(\\\\.0{1,4})?)$') && double(self) > 0.0",message="must be a decimal in (0, 1] with at most four places, such as 0.95"
	Headroom string `json:"headroom,omitempty"`

	// Members are the workloads of this namespace allowed on the reserved GPUs.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(o, o.workloadRef.kind == m.workloadRef.kind && o.workloadRef.name == m.workloadRef.name))",message="two members refer to the same workload"
	Members []ReservationMember `json:"members"`
}

// ReservationMember is one workload allowed on the reservation.
type ReservationMember struct {
	// Name identifies the member inside the reservation.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// WorkloadRef is the member workload, in the reservation's namespace.
	// +required
	WorkloadRef WorkloadReference `json:"workloadRef"`
}

// GPUReservationStatus is what the controller holds and observes.
type GPUReservationStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase ReservationPhase `json:"phase,omitempty"`
	// GPUCount is the number of GPUs held, for printing.
	// +optional
	GPUCount int32 `json:"gpuCount,omitempty"`
	// BudgetMiBPerGPU is floor(memory MiB × headroom) of the smallest held GPU.
	// +optional
	BudgetMiBPerGPU int64 `json:"budgetMiBPerGPU,omitempty"`
	// Devices are the GPUs held.
	// +optional
	// +listType=map
	// +listMapKey=uuid
	Devices []ReservedDevice `json:"devices,omitempty"`
	// Members are the member pods running or in flight with their VRAM budgets.
	// +optional
	// +listType=map
	// +listMapKey=name
	Members []MemberStatus `json:"members,omitempty"`
	// Conditions: Ready, Degraded, PlacementMismatch.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ReservedDevice is one GPU held by the reservation.
type ReservedDevice struct {
	// +required
	UUID string `json:"uuid"`
	// Pool and Device locate the GPU in the ResourceSlices of driver gpu.rota.dev.
	// +optional
	Pool string `json:"pool,omitempty"`
	// +optional
	Device string `json:"device,omitempty"`
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// +optional
	Healthy bool `json:"healthy"`
}

// MemberStatus is one member's use of the reservation.
type MemberStatus struct {
	// +required
	Name string `json:"name"`
	// Pods is the number of member pods running or in flight.
	// +optional
	Pods int32 `json:"pods"`
	// MemoryMiB is the VRAM budget those pods declare in total.
	// +optional
	MemoryMiB int64 `json:"memoryMiB"`
	// Placement is Converged (allocated inside the reservation) or
	// PlacementMismatch (allocated outside; never corrected automatically).
	// +optional
	Placement string `json:"placement,omitempty"`
}

// GPUReservationList is a list of GPUReservations.
// +kubebuilder:object:root=true
type GPUReservationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GPUReservation `json:"items"`
}
