package report

import (
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// TransitionLog collects the steps of every DeploySchedule as they appear
// in status, so that transitions are kept after the schedule moves on.
type TransitionLog struct {
	mu    sync.Mutex
	steps map[string]loggedStep
}

type loggedStep struct {
	schedule string
	at       time.Time
	seen     int
	step     Step
}

// NewTransitionLog returns an empty log.
func NewTransitionLog() *TransitionLog { return &TransitionLog{steps: map[string]loggedStep{}} }

// Observe records the steps of a DeploySchedule; other objects are ignored.
func (l *TransitionLog) Observe(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetKind() != "DeploySchedule" {
		return
	}
	var ds v1alpha1.DeploySchedule
	if err := fromUnstructured(u, &ds); err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range ds.Status.Targets {
		for _, s := range t.Steps {
			at, ok := intervalOf(s.Key)
			if !ok {
				continue
			}
			rs := Step{Target: t.Name, Group: string(s.Group), Action: s.Action, Replicas: s.Replicas, Phase: string(s.Phase), Reason: s.Reason}
			if s.SubmittedAt != nil {
				rs.SubmittedAt = &s.SubmittedAt.Time
			}
			if s.CompletedAt != nil {
				rs.CompletedAt = &s.CompletedAt.Time
			}
			prev, known := l.steps[s.Key]
			seen := len(l.steps)
			if known {
				seen = prev.seen
			}
			l.steps[s.Key] = loggedStep{schedule: ds.Namespace + "/" + ds.Name, at: at, seen: seen, step: rs}
		}
	}
}

// intervalOf reads the interval start out of a step key
// (<schedule UID>/<target>/<RFC 3339 start>/<action>[#retry]).
func intervalOf(key string) (time.Time, bool) {
	parts := strings.Split(key, "/")
	if len(parts) < 4 {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, parts[2])
	return at, err == nil
}

// Transitions are the logged steps grouped per schedule and boundary, in
// time order; releases before acquires, each in the order they appeared.
func (l *TransitionLog) Transitions() []Transition {
	l.mu.Lock()
	defer l.mu.Unlock()
	type key struct {
		schedule string
		at       time.Time
	}
	groups := map[key][]loggedStep{}
	for _, s := range l.steps {
		k := key{s.schedule, s.at}
		groups[k] = append(groups[k], s)
	}
	out := make([]Transition, 0, len(groups))
	for k, steps := range groups {
		sort.Slice(steps, func(i, j int) bool {
			if ri, rj := steps[i].step.Group == "Release", steps[j].step.Group == "Release"; ri != rj {
				return ri
			}
			return steps[i].seen < steps[j].seen
		})
		t := Transition{Schedule: k.schedule, At: k.at}
		for _, s := range steps {
			t.Steps = append(t.Steps, s.step)
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Schedule < out[j].Schedule
	})
	return out
}
