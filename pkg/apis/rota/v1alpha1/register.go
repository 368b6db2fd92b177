package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every Rota custom resource.
const GroupName = "rota.dev"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// The resources of this group, for the dynamic client (Rota has no
// generated clientset).
var (
	DeploySchedulesResource = SchemeGroupVersion.WithResource("deployschedules")
	GPUReservationsResource = SchemeGroupVersion.WithResource("gpureservations")
	GPUQuotasResource       = SchemeGroupVersion.WithResource("gpuquotas")
)

// Resource returns a GroupResource for a resource of this group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&DeploySchedule{}, &DeployScheduleList{},
		&GPUReservation{}, &GPUReservationList{},
		&GPUQuota{}, &GPUQuotaList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
