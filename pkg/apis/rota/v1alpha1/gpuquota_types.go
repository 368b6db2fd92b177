package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUQuota is one tenant's GPUs per model: how many it is guaranteed, how
// many more it may borrow while others leave theirs idle, and how much of
// its idle guarantee others may borrow. The tenant is the namespace the
// object is named after; the object is cluster-scoped, so a namespace's
// admins cannot write their own guarantee.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=gpuquotas,scope=Cluster,shortName=gpuq,categories=rota
// +kubebuilder:printcolumn:name="Fits",type=string,JSONPath=`.status.conditions[?(@.type=="GuaranteesFit")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="the name is the tenant's namespace: a DNS label"
type GPUQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec GPUQuotaSpec `json:"spec"`
	// +optional
	Status GPUQuotaStatus `json:"status,omitempty"`
}

// OverLimitPolicy says what happens to a pod that would take its tenant
// past a borrowing limit.
// +kubebuilder:validation:Enum=Wait;Refuse
type OverLimitPolicy string

// Over-limit policies.
const (
	// OverLimitWait keeps the pod queued (QuotaExceeded) until the tenant
	// releases devices.
	OverLimitWait OverLimitPolicy = "Wait"
	// OverLimitRefuse rejects the pod as unresolvable.
	OverLimitRefuse OverLimitPolicy = "Refuse"
)

// GPUQuotaSpec is the tenant's guarantee and limits, per GPU model.
type GPUQuotaSpec struct {
	// Models lists the tenant's quota per GPU model (the driver's `model`
	// attribute, e.g. H100). A model not listed is neither guaranteed nor
	// limited.
	// +required
	// +listType=map
	// +listMapKey=model
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Models []ModelQuota `json:"models"`

	// OverLimit is Wait (default) or Refuse.
	// +optional
	// +kubebuilder:default=Wait
	OverLimit OverLimitPolicy `json:"overLimit,omitempty"`
}

// ModelQuota is the tenant's quota for one GPU model.
//
// +kubebuilder:validation:XValidation:rule="!has(self.lendingLimit) || self.lendingLimit <= self.guaranteed",message="lendingLimit cannot exceed guaranteed: a tenant lends only what it is guaranteed",fieldPath=".lendingLimit"
type ModelQuota struct {
	// Model is the value of the devices' model attribute.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Model string `json:"model"`

	// Guaranteed is how many GPUs of the model the tenant can always get:
	// while it holds fewer and has a pod waiting that they cover, Rota
	// reclaims GPUs that other tenants borrowed.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	Guaranteed int32 `json:"guaranteed"`

	// BorrowingLimit is how many GPUs of the model the tenant may hold
	// beyond its guarantee, taken from idle GPUs; unset means any idle GPU,
	// 0 means none. Borrowed GPUs can be reclaimed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	BorrowingLimit *int32 `json:"borrowingLimit,omitempty"`

	// LendingLimit is how much of its idle guarantee other tenants may
	// borrow; unset means all of it. What it does not lend stays free for
	// the tenant, so its pods start without waiting for a reclaim.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	LendingLimit *int32 `json:"lendingLimit,omitempty"`
}

// GPUQuotaStatus is what the tenant holds per model and whether the
// guarantees of every tenant fit the pool.
type GPUQuotaStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Models are the tenant's numbers per model of its spec.
	// +optional
	// +listType=map
	// +listMapKey=model
	Models []ModelQuotaStatus `json:"models,omitempty"`

	// Conditions: GuaranteesFit.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ModelQuotaStatus is one model's numbers.
type ModelQuotaStatus struct {
	// Model is the GPU model.
	Model string `json:"model"`
	// Guaranteed repeats the spec.
	Guaranteed int32 `json:"guaranteed"`
	// Used is how many GPUs of the model the tenant's allocated claims hold.
	Used int32 `json:"used"`
	// Borrowed is how many of those are beyond its guarantee.
	Borrowed int32 `json:"borrowed"`
	// Lent is how many of its idle guaranteed GPUs other tenants borrow.
	Lent int32 `json:"lent"`
}

// GPUQuotaList is a list of GPUQuotas.
//
// +kubebuilder:object:root=true
type GPUQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GPUQuota `json:"items"`
}

// The GuaranteesFit condition of a GPUQuota: whether, for each model of its
// spec, the guarantees of every tenant fit the pool's healthy GPUs of that
// model (GPUs a GPUReservation holds counted once).
const (
	// ConditionGuaranteesFit is the condition type.
	ConditionGuaranteesFit = "GuaranteesFit"
	// ReasonGuaranteesFit: every model's guarantees fit (status True).
	ReasonGuaranteesFit = "Fits"
	// ReasonGuaranteesExceedPool: some model's guarantees exceed its
	// healthy GPUs (status False); the message has the numbers.
	ReasonGuaranteesExceedPool = "ExceedPool"
)
