package controller

import (
	"errors"

	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Informers are the shared informers the controller reads from. They come
// from factories its binary owns, so that every controller of the binary
// shares one cache per resource; the binary starts them after New and shuts
// them down after Run (docs/reservations.md).
type Informers struct {
	// Reservations serves rotav1.GPUReservationsResource (from a dynamic
	// informer factory: GPUReservation has no typed client).
	Reservations informers.GenericInformer
	Slices       resourceinformers.ResourceSliceInformer
	Claims       resourceinformers.ResourceClaimInformer
	Rules        resourceinformers.DeviceTaintRuleInformer
	Classes      resourceinformers.DeviceClassInformer
	Pods         coreinformers.PodInformer
	Nodes        coreinformers.NodeInformer
	// ReplicaSets, Deployments, StatefulSets and Jobs resolve a member
	// pod's controller chain (each hop verified by UID and selector).
	ReplicaSets  appsinformers.ReplicaSetInformer
	Deployments  appsinformers.DeploymentInformer
	StatefulSets appsinformers.StatefulSetInformer
	Jobs         batchinformers.JobInformer
	// LeaderWorkerSets serves rotav1.LeaderWorkerSetsResource where the
	// cluster serves that API; nil otherwise, and then pods of a
	// LeaderWorkerSet are counted as no member's.
	LeaderWorkerSets informers.GenericInformer
}

// NewInformers takes the controller's informers from the caller's factories.
// Start the factories after New: a factory starts only the informers asked
// of it by then.
func NewInformers(factory informers.SharedInformerFactory, dynFactory dynamicinformer.DynamicSharedInformerFactory) Informers {
	return Informers{
		Reservations: dynFactory.ForResource(rotav1.GPUReservationsResource),
		Slices:       factory.Resource().V1().ResourceSlices(),
		Claims:       factory.Resource().V1().ResourceClaims(),
		Rules:        factory.Resource().V1().DeviceTaintRules(),
		Classes:      factory.Resource().V1().DeviceClasses(),
		Pods:         factory.Core().V1().Pods(),
		Nodes:        factory.Core().V1().Nodes(),
		ReplicaSets:  factory.Apps().V1().ReplicaSets(),
		Deployments:  factory.Apps().V1().Deployments(),
		StatefulSets: factory.Apps().V1().StatefulSets(),
		Jobs:         factory.Batch().V1().Jobs(),
	}
}

// validate names the informers that are missing, in field order.
func (inf Informers) validate() error {
	var errs []error
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"Reservations", inf.Reservations == nil}, {"Slices", inf.Slices == nil}, {"Claims", inf.Claims == nil},
		{"Rules", inf.Rules == nil}, {"Classes", inf.Classes == nil}, {"Pods", inf.Pods == nil},
		{"Nodes", inf.Nodes == nil}, {"ReplicaSets", inf.ReplicaSets == nil}, {"Deployments", inf.Deployments == nil},
		{"StatefulSets", inf.StatefulSets == nil}, {"Jobs", inf.Jobs == nil},
	} {
		if f.missing {
			errs = append(errs, errors.New("Informers."+f.name+" is required"))
		}
	}
	return errors.Join(errs...)
}
