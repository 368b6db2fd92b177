package schedule

import (
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Small builders so each test shows only what matters to it.

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("loading zone %s: %v", name, err)
	}
	return loc
}

// wall parses "2006-01-02 15:04" in loc.
func wall(t testing.TB, loc *time.Location, s string) time.Time {
	t.Helper()
	ts, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return ts
}

func utc(t testing.TB, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return ts
}

func newSchedule(tz string, targets []v1alpha1.ScheduleTarget, windows ...v1alpha1.ScheduleWindow) *v1alpha1.DeploySchedule {
	return &v1alpha1.DeploySchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: "default"},
		Spec:       v1alpha1.DeployScheduleSpec{TimeZone: tz, Targets: targets, Windows: windows},
	}
}

func newTarget(name string, state v1alpha1.DesiredState) v1alpha1.ScheduleTarget {
	return v1alpha1.ScheduleTarget{
		Name:         name,
		WorkloadRef:  v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-" + name},
		DefaultState: state,
	}
}

func recurring(name string, priority int32, cron string, d string, states ...v1alpha1.TargetState) v1alpha1.ScheduleWindow {
	return v1alpha1.ScheduleWindow{Name: name, Priority: priority, States: states,
		Recurring: &v1alpha1.RecurringWindow{Cron: cron, Duration: v1alpha1.Duration(d)}}
}

func oneShot(name string, priority int32, from, until time.Time, states ...v1alpha1.TargetState) v1alpha1.ScheduleWindow {
	return v1alpha1.ScheduleWindow{Name: name, Priority: priority, States: states,
		OneShot: &v1alpha1.OneShotWindow{ActiveFrom: metav1.NewTime(from), ActiveUntil: metav1.NewTime(until)}}
}

func running(target string) v1alpha1.TargetState {
	return v1alpha1.TargetState{Target: target, DesiredState: v1alpha1.StateRunning}
}

func stopped(target string) v1alpha1.TargetState {
	return v1alpha1.TargetState{Target: target, DesiredState: v1alpha1.StateStopped}
}

func withReplicas(st v1alpha1.TargetState, n int32) v1alpha1.TargetState {
	r := v1alpha1.Replicas(n)
	st.Replicas = &r
	return st
}

func loadExample(t testing.TB, name string) *v1alpha1.DeploySchedule {
	t.Helper()
	data, err := os.ReadFile("../../examples/" + name)
	if err != nil {
		t.Fatalf("reading example: %v", err)
	}
	var ds v1alpha1.DeploySchedule
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		t.Fatalf("decoding example %s: %v", name, err)
	}
	return &ds
}

func mustCompile(t testing.TB, ds *v1alpha1.DeploySchedule) *Schedule {
	t.Helper()
	s, err := Compile(ds)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func mustEvaluate(t testing.TB, ds *v1alpha1.DeploySchedule, from, to time.Time) *Timeline {
	t.Helper()
	tl, err := mustCompile(t, ds).Evaluate(from, to)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	return tl
}

func iv(target string, start, end time.Time, state v1alpha1.DesiredState, replicas int32, allowDowntime bool, source string) Interval {
	return Interval{Target: target, Start: start, End: end,
		Intent: Intent{State: state, Replicas: replicas, AllowDowntime: allowDowntime, Source: source}}
}

func stop(target string) Step { return Step{Target: target, Action: ActionStop} }

func start(target string, replicas int32) Step {
	return Step{Target: target, Action: ActionStart, Replicas: replicas}
}

func scale(target string, replicas int32) Step {
	return Step{Target: target, Action: ActionScale, Replicas: replicas}
}
