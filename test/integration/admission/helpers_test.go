package admission

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

const sched = scheduler.ProfileName

// simTime is the scenario's clock: the test advances it step by step and
// logs each step with it, so the log reads like the scenario.
type simTime struct {
	tb    testing.TB
	start time.Time
	clock *clocktesting.FakeClock
}

func newSimTime(tb testing.TB) *simTime {
	start := time.Date(2026, 10, 19, 0, 0, 0, 0, time.UTC)
	return &simTime{tb: tb, start: start, clock: clocktesting.NewFakeClock(start)}
}

// at moves the clock to t minutes after the start and logs what happens.
func (s *simTime) at(minutes int, what string) {
	s.tb.Helper()
	s.clock.SetTime(s.start.Add(time.Duration(minutes) * time.Minute))
	s.tb.Logf("t=%d: %s", minutes, what)
}

// waitingCondition returns the pod's rota.dev/Waiting condition or nil.
func waitingCondition(tb testing.TB, cp *framework.ControlPlane, namespace, name string) *v1.PodCondition {
	tb.Helper()
	p, err := cp.Client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		tb.Fatalf("get pod %s/%s: %v", namespace, name, err)
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == gpuv1.WaitingCondition {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
