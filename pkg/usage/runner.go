package usage

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// DefaultPeriod is how often the Runner observes the pool.
const DefaultPeriod = time.Minute

// Runner observes the pool every Period on Clock and feeds the Meter. It
// reads the driver's ResourceSlices, the allocated ResourceClaims and the
// reservations' DeviceTaintRules (cluster-scoped, written only by the
// reservation controller: a tenant cannot make a GPU look reserved) from
// the binary's informers, and each reservation's phase from its status
// (written only by the controller: the status subresource).
type Runner struct {
	meter  *Meter
	clock  clock.WithTicker
	period time.Duration
	driver string
	slices resourcelisters.ResourceSliceLister
	claims resourcelisters.ResourceClaimLister
	rules  resourcelisters.DeviceTaintRuleLister
	// reservations lists GPUReservations; nil charges every reservation.
	reservations cache.GenericLister
	synced       []cache.InformerSynced
}

// NewRunner takes its informers from factory and reservations, the
// GPUReservations' informer (rotav1.GPUReservationsResource), which the
// caller starts. period <= 0 means DefaultPeriod.
func NewRunner(meter *Meter, clk clock.WithTicker, period time.Duration, factory informers.SharedInformerFactory, reservations informers.GenericInformer) *Runner {
	if period <= 0 {
		period = DefaultPeriod
	}
	r := factory.Resource().V1()
	return &Runner{
		meter: meter, clock: clk, period: period, driver: gpuv1.DriverName,
		slices: r.ResourceSlices().Lister(), claims: r.ResourceClaims().Lister(), rules: r.DeviceTaintRules().Lister(),
		reservations: reservations.Lister(),
		synced: []cache.InformerSynced{r.ResourceSlices().Informer().HasSynced, r.ResourceClaims().Informer().HasSynced,
			r.DeviceTaintRules().Informer().HasSynced, reservations.Informer().HasSynced},
	}
}

// phase is the phase of reservation namespace/name as its status says;
// "" when it is not found.
func (r *Runner) phase(namespace, name string) rotav1.ReservationPhase {
	if r.reservations == nil {
		return ""
	}
	o, err := r.reservations.ByNamespace(namespace).Get(name)
	if err != nil {
		return ""
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return rotav1.ReservationPhase(p)
}

// Run observes until ctx ends; workers is ignored (one loop).
func (r *Runner) Run(ctx context.Context, _ int) {
	logger := klog.FromContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), r.synced...) {
		return
	}
	ticker := r.clock.NewTicker(r.period)
	defer ticker.Stop()
	for {
		if err := r.ObserveNow(); err != nil {
			logger.Error(err, "Usage observation failed; the next one charges the time since the last")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// ObserveNow reads the pool from the informers and feeds the meter at the
// clock's now.
func (r *Runner) ObserveNow() error {
	h, err := r.Holdings()
	if err != nil {
		return err
	}
	r.meter.Observe(r.clock.Now(), h)
	return nil
}

// Holdings is the charge rule applied to the pool as the informers see it.
func (r *Runner) Holdings() (map[Key]Holding, error) {
	all, err := r.slices.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	slices := all[:0:0]
	for _, s := range all {
		if s.Spec.Driver == r.driver {
			slices = append(slices, s)
		}
	}
	claims, err := r.claims.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	rules, err := r.rules.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list DeviceTaintRules: %w", err)
	}
	reserved := gpupool.ReservedByRules(rules, r.driver)
	pool := gpupool.NewPool(slices, claims, nil)
	gpus := make([]GPU, 0, len(pool.ByID))
	for _, d := range pool.Devices() {
		g := GPU{Model: d.Model()}
		if ns, name, ok := gpuv1.ParseReservedTaintValue(reserved[d.ID]); ok {
			g.ReservedBy, g.ReservationPhase = ns, r.phase(ns, name)
		}
		for _, a := range d.Allocations {
			g.Tenants = append(g.Tenants, a.Claim.Namespace)
		}
		gpus = append(gpus, g)
	}
	return Charge(gpus), nil
}
