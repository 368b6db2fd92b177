package waitreason

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/waits"
)

// unknownModel labels a pod whose first choice the scheduler could not
// name (no tier was counted, or it waits only at binding).
const unknownModel = "unknown"

// waitingPods tracks the profile's pods that wait, for two signals per
// device model: how many wait now (rota_admission_waiting_pods, by the
// model of their first tier and reason) and how long the pods that were
// never placed had waited when they went away
// (rota_admission_unplaced_wait_seconds). A pod's model is that of the
// first tier of its first request, as its wait detail names it.
type waitingPods struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	pods  map[types.UID]waitEntry

	gauge    *metrics.GaugeVec
	unplaced *metrics.HistogramVec
}

type waitEntry struct {
	model, reason string
	since         time.Time
}

func newWaitingPods(clk clock.PassiveClock, m *pluginMetrics) *waitingPods {
	return &waitingPods{clock: clk, pods: map[types.UID]waitEntry{}, gauge: m.waitingPods, unplaced: m.unplacedWait}
}

// waits records that pod uid waits for v; a verdict that names no tier
// keeps the model known from an earlier one.
func (w *waitingPods) waits(uid types.UID, v waits.Verdict) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, known := w.pods[uid]
	next := waitEntry{model: unknownModel, reason: string(v.Reason), since: w.clock.Now()}
	if known {
		next.model, next.since = prev.model, prev.since
		w.gauge.WithLabelValues(prev.model, prev.reason).Dec()
	}
	if len(v.Detail.Tiers) > 0 && v.Detail.Tiers[0].Name != "" {
		next.model = v.Detail.Tiers[0].Name
	}
	w.pods[uid] = next
	w.gauge.WithLabelValues(next.model, next.reason).Inc()
}

// placed forgets a pod that was bound.
func (w *waitingPods) placed(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.pods[uid]; ok {
		w.gauge.WithLabelValues(e.model, e.reason).Dec()
		delete(w.pods, uid)
	}
}

// deleted forgets a pod that went away; one that still waited was never
// placed, and its wait is observed.
func (w *waitingPods) deleted(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.pods[uid]; ok {
		w.gauge.WithLabelValues(e.model, e.reason).Dec()
		w.unplaced.WithLabelValues(e.model, e.reason).Observe(w.clock.Since(e.since).Seconds())
		delete(w.pods, uid)
	}
}
