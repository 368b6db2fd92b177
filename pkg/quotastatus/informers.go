package quotastatus

import (
	"errors"

	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	resourceinformers "k8s.io/client-go/informers/resource/v1"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Informers are the shared informers the controller reads from. They come
// from factories its binary owns; the binary starts them after New and
// shuts them down after Run.
type Informers struct {
	// Quotas serves rotav1.GPUQuotasResource and Reservations
	// rotav1.GPUReservationsResource (dynamic informers: neither has a
	// typed client).
	Quotas       informers.GenericInformer
	Reservations informers.GenericInformer
	Slices       resourceinformers.ResourceSliceInformer
	Claims       resourceinformers.ResourceClaimInformer
}

// NewInformers takes the controller's informers from the caller's
// factories. Start the factories after New: a factory starts only the
// informers asked of it by then.
func NewInformers(factory informers.SharedInformerFactory, dynFactory dynamicinformer.DynamicSharedInformerFactory) Informers {
	return Informers{
		Quotas:       dynFactory.ForResource(rotav1.GPUQuotasResource),
		Reservations: dynFactory.ForResource(rotav1.GPUReservationsResource),
		Slices:       factory.Resource().V1().ResourceSlices(),
		Claims:       factory.Resource().V1().ResourceClaims(),
	}
}

// validate names the informers that are missing, in field order.
func (inf Informers) validate() error {
	var errs []error
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"Quotas", inf.Quotas == nil}, {"Reservations", inf.Reservations == nil},
		{"Slices", inf.Slices == nil}, {"Claims", inf.Claims == nil},
	} {
		if f.missing {
			errs = append(errs, errors.New("Informers."+f.name+" is required"))
		}
	}
	return errors.Join(errs...)
}
