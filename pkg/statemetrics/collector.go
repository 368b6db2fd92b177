package statemetrics

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Listers are the caches the collector reads.
type Listers struct {
	Slices       resourcelisters.ResourceSliceLister
	Claims       resourcelisters.ResourceClaimLister
	Pods         corelisters.PodLister
	Reservations cache.GenericLister
	Schedules    cache.GenericLister
	// Synced reports whether every cache has synced; until it does the
	// collector exports nothing (a replica that does not lead starts no
	// informers and so exports nothing either).
	Synced func() bool
}

// ListersFrom takes the listers from the binary's informer factories (which
// the caller starts).
func ListersFrom(factory informers.SharedInformerFactory, dyn dynamicinformer.DynamicSharedInformerFactory) Listers {
	r := factory.Resource().V1()
	slices, claims, pods := r.ResourceSlices(), r.ResourceClaims(), factory.Core().V1().Pods()
	res, sch := dyn.ForResource(rotav1.GPUReservationsResource), dyn.ForResource(rotav1.DeploySchedulesResource)
	synced := []cache.InformerSynced{slices.Informer().HasSynced, claims.Informer().HasSynced, pods.Informer().HasSynced,
		res.Informer().HasSynced, sch.Informer().HasSynced}
	return Listers{
		Slices: slices.Lister(), Claims: claims.Lister(), Pods: pods.Lister(),
		Reservations: res.Lister(), Schedules: sch.Lister(),
		Synced: func() bool {
			for _, s := range synced {
				if !s() {
					return false
				}
			}
			return true
		},
	}
}

// Collector computes the gauges at every scrape. Register it with
// metrics.KubeRegistry.CustomMustRegister.
type Collector struct {
	metrics.BaseStableCollector

	l      Listers
	driver string

	poolGPUs         *metrics.Desc
	waitingPods      *metrics.Desc
	waitingSince     *metrics.Desc
	targetStatus     *metrics.Desc
	reservationConds *metrics.Desc
}

// New returns a collector over l for Rota's driver (gpu.rota.dev).
func New(l Listers) *Collector {
	return &Collector{
		l: l, driver: gpuv1.DriverName,
		poolGPUs: metrics.NewDesc("rota_pool_gpus",
			"GPUs published by the driver's ResourceSlices, by node, model and state: unhealthy (a device taint other than a reservation's), reserved (held by a GPUReservation), allocated (allocated to a claim), free. Each GPU counts in exactly one state.",
			[]string{"node", "model", "state"}, nil, metrics.ALPHA, ""),
		waitingPods: metrics.NewDesc("rota_admission_waiting_pods",
			"Pods whose "+string(gpuv1.WaitingCondition)+" condition is True, by namespace and wait reason code.",
			[]string{"namespace", "reason"}, nil, metrics.ALPHA, ""),
		waitingSince: metrics.NewDesc("rota_admission_waiting_since_timestamp_seconds",
			"Creation time (Unix seconds) of the oldest pod waiting with this reason code in this namespace; time() minus it is how long that pod has waited.",
			[]string{"namespace", "reason"}, nil, metrics.ALPHA, ""),
		targetStatus: metrics.NewDesc("rota_schedule_target_status",
			"One series per DeploySchedule target, value 1, labelled with the target's phase and reason (status.targets[]).",
			[]string{"namespace", "schedule", "target", "phase", "reason"}, nil, metrics.ALPHA, ""),
		reservationConds: metrics.NewDesc("rota_reservation_status_condition",
			"Conditions of a GPUReservation (Ready, Degraded, PlacementMismatch): 1 when True, 0 otherwise, with the condition's reason.",
			[]string{"namespace", "reservation", "condition", "reason"}, nil, metrics.ALPHA, ""),
	}
}

// DescribeWithStability implements metrics.StableCollector.
func (c *Collector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- c.poolGPUs
	ch <- c.waitingPods
	ch <- c.waitingSince
	ch <- c.targetStatus
	ch <- c.reservationConds
}

// CollectWithStability implements metrics.StableCollector.
func (c *Collector) CollectWithStability(ch chan<- metrics.Metric) {
	if c.l.Synced != nil && !c.l.Synced() {
		return
	}
	reservations := convertAll[rotav1.GPUReservation](c.l.Reservations)
	c.collectPool(ch, reservations)
	c.collectWaiting(ch)
	c.collectTargets(ch)
	c.collectReservations(ch, reservations)
}

// convertAll lists a dynamic lister's objects as T; objects that do not
// convert are left out (the API server validated them against the CRD).
func convertAll[T any](l cache.GenericLister) []T {
	if l == nil {
		return nil
	}
	objs, err := l.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(runtime.Unstructured)
		if !ok {
			continue
		}
		var t T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &t); err == nil {
			out = append(out, t)
		}
	}
	return out
}
