package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/forecast"
)

// forecaster keeps one capacity forecast of the whole cluster (every
// schedule shares the pool), read again when it is older than the period
// or forgotten because a schedule changed.
type forecaster struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	// sources are the informers the forecast reads schedules and their
	// workloads from, when the controller has them (zero: the API).
	sources forecast.Sources
	clock   clock.PassiveClock
	period  time.Duration
	span    time.Duration

	mu     sync.Mutex
	at     time.Time
	result *forecastView
}

// forecastView is a forecast with its over-commits and transitions indexed
// by schedule ("namespace/name"), built once per forecast: every schedule's
// pass reads its own part, not the whole cluster's.
type forecastView struct {
	*forecast.Forecast
	// windows and swaps index Overcommits and the over-committed
	// Transitions, in their order.
	windows map[string][]int32
	swaps   map[string][]int32
}

func newForecastView(f *forecast.Forecast) *forecastView {
	v := &forecastView{Forecast: f, windows: map[string][]int32{}, swaps: map[string][]int32{}}
	for i, oc := range f.Overcommits {
		last := ""
		for _, t := range oc.Targets {
			// A target is named namespace/schedule/target.
			key, ok := scheduleOf(t)
			if !ok || key == last {
				continue
			}
			last = key
			if w := v.windows[key]; len(w) == 0 || w[len(w)-1] != int32(i) {
				v.windows[key] = append(w, int32(i))
			}
		}
	}
	for i, tr := range f.Transitions {
		if len(tr.Over) > 0 {
			v.swaps[tr.Schedule] = append(v.swaps[tr.Schedule], int32(i))
		}
	}
	return v
}

// of returns how many over-commits the schedule key has, the first one,
// and its first over-committed transition (nil when none).
func (v *forecastView) of(key string) (int, *forecast.Overcommit, *forecast.Transition) {
	var oc *forecast.Overcommit
	var tr *forecast.Transition
	if w := v.windows[key]; len(w) > 0 {
		oc = &v.Overcommits[w[0]]
	}
	if sw := v.swaps[key]; len(sw) > 0 {
		tr = &v.Transitions[sw[0]]
	}
	return len(v.windows[key]), oc, tr
}

// scheduleOf is the "namespace/name" of the schedule a forecast target
// ("namespace/name/target") belongs to.
func scheduleOf(target string) (string, bool) {
	i := strings.IndexByte(target, '/')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(target[i+1:], '/')
	if j < 0 {
		return "", false
	}
	return target[:i+1+j], true
}

// forget drops the forecast; the next pass computes a new one.
func (f *forecaster) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.result = nil
}

// get returns the forecast from now, computing it when needed.
func (f *forecaster) get(ctx context.Context) (*forecastView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	if f.result != nil && now.Sub(f.at) < f.period && !now.Before(f.at) {
		return f.result, nil
	}
	objs, skipped, err := forecast.ReadCluster(ctx, f.client, f.dynamic, f.sources)
	if err != nil {
		return nil, err
	}
	for _, s := range skipped {
		klog.FromContext(ctx).V(4).Info("Left out of the forecast", "what", s)
	}
	from := now.Truncate(time.Minute)
	in, err := forecast.Build(objs, from, from.Add(f.span))
	if err != nil {
		return nil, err
	}
	res, err := forecast.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	f.at, f.result = now, newForecastView(res)
	return f.result, nil
}

// forecastCondition sets the schedule's Forecast condition and queues a
// Warning event when it turns False.
func (p *pass) forecastCondition(ctx context.Context, loc *time.Location) {
	fc := p.c.forecasts
	if fc == nil {
		return
	}
	// The status before this pass, copied: setCondition updates the
	// condition in place.
	var before metav1.ConditionStatus
	if c := meta.FindStatusCondition(p.ds.Status.Conditions, v1alpha1.ConditionForecast); c != nil {
		before = c.Status
	}
	res, err := fc.get(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Capacity forecast failed")
		p.status.setCondition(v1alpha1.ConditionForecast, metav1.ConditionUnknown, v1alpha1.ReasonForecastFailed, err.Error())
		return
	}
	msg, over := overcommitOf(res, p.ds, loc)
	if !over {
		p.status.setCondition(v1alpha1.ConditionForecast, metav1.ConditionTrue, v1alpha1.ReasonForecastFits, msg)
		return
	}
	p.status.setCondition(v1alpha1.ConditionForecast, metav1.ConditionFalse, v1alpha1.ReasonForecastOvercommitted, msg)
	if before != metav1.ConditionFalse {
		p.status.event(event{warning: true, reason: v1alpha1.ReasonForecastOvercommitted, message: truncate(msg, 1024)})
	}
}

// overcommitOf describes the first over-committed window or transition of
// the forecast that involves one of ds's targets.
func overcommitOf(f *forecastView, ds *v1alpha1.DeploySchedule, loc *time.Location) (string, bool) {
	key := ds.Namespace + "/" + ds.Name
	const layout = "Mon 2006-01-02 15:04 MST"
	windows, oc, tr := f.of(key)
	// The horizon, not its bounds: a message that changed every minute
	// would write the status at every pass.
	span := "the next " + forecastHorizon(f.To.Sub(f.From))
	switch {
	case oc != nil && (tr == nil || !tr.At.Before(oc.From)):
		msg := fmt.Sprintf("%d over-committed window(s) in %s; the first: %s %s to %s asks for %d of %d GPUs (%s): %s",
			windows, span, forecast.ModelLabel(oc.Model), oc.From.In(loc).Format(layout), oc.To.In(loc).Format(layout), oc.Demand, oc.Capacity, oc.Reason, joinUpTo(oc.Targets, conditionMessageMax))
		if len(oc.Others) > 0 && len(msg) <= conditionMessageMax {
			msg += "; also running: " + joinUpTo(oc.Others, conditionMessageMax)
		}
		return msg, true
	case tr != nil:
		m := tr.Over[0]
		return fmt.Sprintf("the transition at %s peaks at %d of %d %s GPUs while its steps run (%s)",
			tr.At.In(loc).Format(layout), tr.Peak[m], f.Capacity[m], forecast.ModelLabel(m), joinUpTo(stepNames(*tr), conditionMessageMax)), true
	}
	return "the pool holds what every window asks for in " + span, false
}

// joinUpTo joins names with ", " until the result is longer than n: a
// condition message keeps its first conditionMessageMax bytes, so the
// names past them (thousands of targets sharing an over-committed window)
// need not be joined.
func joinUpTo(names []string, n int) string {
	var b strings.Builder
	for i, name := range names {
		if b.Len() > n {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
	}
	return b.String()
}

// forecastHorizon says d in days when it is whole days.
func forecastHorizon(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		if n := int(d / (24 * time.Hour)); n != 1 {
			return fmt.Sprintf("%d days", n)
		}
		return "day"
	}
	return d.String()
}

func stepNames(tr forecast.Transition) []string {
	out := make([]string, len(tr.Steps))
	for i, s := range tr.Steps {
		out[i] = string(s.Action) + " " + s.Target
	}
	return out
}
