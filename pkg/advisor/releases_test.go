package advisor

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// A schedule that runs md-llama in business hours stops it at 18:00: the
// release names its running pods; a transition that also starts a target
// is left out.
func TestScheduleReleases(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Ho_Chi_Minh")
	if err != nil {
		t.Fatal(err)
	}
	target := func(name string) v1alpha1.ScheduleTarget {
		return v1alpha1.ScheduleTarget{Name: name, DefaultState: v1alpha1.StateStopped,
			WorkloadRef: v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-" + name}}
	}
	window := func(targets ...string) v1alpha1.ScheduleWindow {
		w := v1alpha1.ScheduleWindow{Name: "business", Recurring: &v1alpha1.RecurringWindow{Cron: "0 8 * * 1-5", Duration: "10h"}}
		for _, tg := range targets {
			w.States = append(w.States, v1alpha1.TargetState{Target: tg, DesiredState: v1alpha1.StateRunning})
		}
		return w
	}
	ds := &v1alpha1.DeploySchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hours"},
		Spec: v1alpha1.DeployScheduleSpec{TimeZone: "Asia/Ho_Chi_Minh", Targets: []v1alpha1.ScheduleTarget{target("llama")}, Windows: []v1alpha1.ScheduleWindow{window("llama")}}}
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "md-llama-x"}, Spec: v1.PodSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other"}, Spec: v1.PodSpec{NodeName: "n1"}},
	}
	workloadOf := func(p *v1.Pod) string {
		if strings.HasPrefix(p.Name, "md-llama-") {
			return "Deployment/md-llama"
		}
		return ""
	}
	now := time.Date(2026, 10, 19, 10, 0, 0, 0, loc) // Monday 10:00
	got, skipped := ScheduleReleases(now, 24*time.Hour, []*v1alpha1.DeploySchedule{ds}, pods, workloadOf)
	if len(skipped) > 0 || len(got) != 1 {
		t.Fatalf("releases %+v, skipped %v; want one", got, skipped)
	}
	if !got[0].At.Equal(time.Date(2026, 10, 19, 18, 0, 0, 0, loc)) || len(got[0].Workloads) != 1 || got[0].Workloads[0] != "team-a/md-llama-x" ||
		got[0].Source != "DeploySchedule team-a/hours stops Deployment/md-llama" {
		t.Errorf("release %+v, want md-llama-x at 18:00", got[0])
	}
	// Swapping in another target at 18:00: the swap's start may take what
	// the stop frees, so it is no release to wait for.
	ds.Spec.Targets = append(ds.Spec.Targets, target("qwen"))
	night := window("qwen")
	night.Name, night.Recurring.Cron, night.Recurring.Duration = "night", "0 18 * * 1-5", "14h"
	ds.Spec.Windows = append(ds.Spec.Windows, night)
	if got, _ := ScheduleReleases(now, 24*time.Hour, []*v1alpha1.DeploySchedule{ds}, pods, workloadOf); len(got) != 0 {
		t.Errorf("releases %+v, want none when the transition also starts a target", got)
	}
}
