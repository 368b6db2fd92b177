package chaos

import (
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// transitions follows the DeploySchedule's targets and their workloads as
// the watch sees them change.
type transitions struct {
	tally *tally

	mu sync.Mutex
	// keys per workload: the transition keys its annotation has carried,
	// and the current one.
	seenKeys map[string]map[string]bool
	lastKey  map[string]string
	// mutations counts workload writes that carried a new key.
	mutations int
	// steps: the highest phase rank each step key reached.
	steps map[string]rotav1.StepPhase
	// terminal per target and interval start: a terminal phase with a
	// reason was seen for it.
	terminal map[string]bool
	// boundaries already judged.
	judged map[time.Time]bool
	// judgedCount and superseded for the report.
	judgedCount int
}

func newTransitions(t *tally) *transitions {
	return &transitions{tally: t, seenKeys: map[string]map[string]bool{}, lastKey: map[string]string{},
		steps: map[string]rotav1.StepPhase{}, terminal: map[string]bool{}, judged: map[time.Time]bool{}}
}

func stepRank(p rotav1.StepPhase) int {
	switch p {
	case rotav1.StepPlanned:
		return 0
	case rotav1.StepSubmitting:
		return 1
	case rotav1.StepAccepted:
		return 2
	default:
		return 3
	}
}

// observe is the watch's change hook.
func (t *transitions) observe(obj any) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		t.observeWorkload(o)
	case *unstructured.Unstructured:
		if o.GetKind() != "DeploySchedule" {
			return
		}
		var ds rotav1.DeploySchedule
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			return
		}
		t.observeSchedule(&ds)
	}
}

// observeWorkload: every key lands on its workload once. A key that comes
// back after another replaced it is a step applied twice.
func (t *transitions) observeWorkload(d *appsv1.Deployment) {
	if d.Namespace != reservationNamespace {
		return
	}
	key := d.Annotations[gpuv1.TransitionKeyAnnotation]
	name := d.Namespace + "/" + d.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	if key == "" || key == t.lastKey[name] {
		return
	}
	t.lastKey[name] = key
	t.tally.checked(InvTransitionOnce, 1)
	if t.seenKeys[name] == nil {
		t.seenKeys[name] = map[string]bool{}
	}
	if t.seenKeys[name][key] {
		t.tally.violated(InvTransitionOnce, "workload %s carries transition key %s a second time (generation %d)", name, key, d.Generation)
		return
	}
	t.seenKeys[name][key] = true
	t.mutations++
}

// observeSchedule: a step's phase only moves forward, and a target's
// interval is marked once it reached a terminal phase with a reason.
func (t *transitions) observeSchedule(ds *rotav1.DeploySchedule) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ts := range ds.Status.Targets {
		for _, s := range ts.Steps {
			prev, ok := t.steps[s.Key]
			t.tally.checked(InvTransitionOnce, 1)
			if ok && (stepRank(s.Phase) < stepRank(prev) || (stepRank(prev) == 3 && s.Phase != prev)) {
				t.tally.violated(InvTransitionOnce, "schedule %s/%s step %s went from %s back to %s", ds.Namespace, ds.Name, s.Key, prev, s.Phase)
			}
			if !ok || stepRank(s.Phase) >= stepRank(prev) {
				t.steps[s.Key] = s.Phase
			}
		}
		if ts.Desired == nil || ts.Desired.IntervalStart == nil {
			continue
		}
		if ts.Phase == rotav1.TargetPhaseConverged || (ts.Phase == rotav1.TargetPhaseFailed && ts.Reason != "") {
			t.terminal[boundaryKey(ts.Name, ts.Desired.IntervalStart.Time)] = true
		}
	}
}

func boundaryKey(target string, at time.Time) string {
	return fmt.Sprintf("%s@%s", target, at.UTC().Format(time.RFC3339))
}

// judge checks boundary at for every target: it must have reached a
// terminal phase.
func (t *transitions) judge(at time.Time, targets []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.judged[at] {
		return
	}
	t.judged[at] = true
	t.judgedCount++
	for _, target := range targets {
		t.tally.checked(InvBoundaryTerminal, 1)
		if !t.terminal[boundaryKey(target, at)] {
			t.tally.violated(InvBoundaryTerminal, "target %s: the boundary at %s reached no terminal phase (Converged, or Failed with a reason) within %v",
				target, at.UTC().Format(time.RFC3339), boundaryGrace)
		}
	}
}

func (t *transitions) reached(target string, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.terminal[boundaryKey(target, at)]
}

func (t *transitions) counts() (mutations, boundaries int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mutations, t.judgedCount
}
