package statemetrics

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/poolreport"
)

// GPU states of rota_pool_gpus.
const (
	StateFree      = "free"
	StateAllocated = "allocated"
	StateReserved  = "reserved"
	StateUnhealthy = "unhealthy"
)

var states = []string{StateFree, StateAllocated, StateReserved, StateUnhealthy}

// gpuState is the one state a GPU of the pool report counts in: a tainted
// GPU is unhealthy whoever holds it; a GPU a reservation holds is reserved
// whether its members run or not; otherwise allocated or free.
func gpuState(g poolreport.GPU) string {
	switch {
	case g.Health != "Healthy":
		return StateUnhealthy
	case g.Reservation != "":
		return StateReserved
	case len(g.Holders) > 0:
		return StateAllocated
	default:
		return StateFree
	}
}

type nodeModel struct{ node, model string }

// collectPool exports rota_pool_gpus: every state of every (node, model)
// published, zeros included, so that a dashboard sums and an alert compares
// without gaps.
func (c *Collector) collectPool(ch chan<- metrics.Metric, reservations []rotav1.GPUReservation) {
	if c.l.Slices == nil || c.l.Claims == nil {
		return
	}
	slicePtrs, err := c.l.Slices.List(labels.Everything())
	if err != nil {
		return
	}
	claimPtrs, err := c.l.Claims.List(labels.Everything())
	if err != nil {
		return
	}
	slices := make([]resourceapi.ResourceSlice, len(slicePtrs))
	for i, s := range slicePtrs {
		slices[i] = *s
	}
	claims := make([]resourceapi.ResourceClaim, len(claimPtrs))
	for i, cl := range claimPtrs {
		claims[i] = *cl
	}
	counts := map[nodeModel]map[string]int{}
	for _, g := range poolreport.Rows(slices, claims, reservations, c.driver) {
		k := nodeModel{g.Node, g.Model}
		if counts[k] == nil {
			counts[k] = map[string]int{}
		}
		counts[k][gpuState(g)]++
	}
	for k, byState := range counts {
		for _, s := range states {
			ch <- metrics.NewLazyConstMetric(c.poolGPUs, metrics.GaugeValue, float64(byState[s]), k.node, k.model, s)
		}
	}
}
