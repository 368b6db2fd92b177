package controller

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// outcomes ends transition steps: every step that fails or converges goes
// through it, so its phase, reason, completion time and the actions metric
// (docs/schedule.md, "Metrics") always agree.
type outcomes struct {
	now     time.Time
	actions *metrics.CounterVec
}

// fail ends s with a terminal reason; the message gets the reason's fix text
// unless it already carries one.
func (o outcomes) fail(s *v1alpha1.TransitionStep, reason, msg string) {
	if !strings.Contains(msg, "Fix: ") {
		msg = withFix(reason, msg)
	}
	s.Phase, s.Reason, s.Message, s.CompletedAt = v1alpha1.StepFailed, reason, truncate(msg, 1024), timeAt(o.now)
	o.actions.WithLabelValues(s.Action, reason).Inc()
}

// succeed ends s as converged.
func (o outcomes) succeed(s *v1alpha1.TransitionStep, msg string) {
	s.Phase, s.Reason, s.Message, s.CompletedAt = v1alpha1.StepSucceeded, ReasonConverged, truncate(msg, 1024), timeAt(o.now)
	o.actions.WithLabelValues(s.Action, ReasonConverged).Inc()
}

// timeAt is at as a status timestamp.
func timeAt(at time.Time) *metav1.Time { t := metav1.NewTime(at); return &t }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
