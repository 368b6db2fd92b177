package validation

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// specExample is the schedule of docs/schedule.md, valid as written.
func specExample() *v1alpha1.DeploySchedule {
	return &v1alpha1.DeploySchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-pool-h100-shared", Namespace: "serving"},
		Spec: v1alpha1.DeployScheduleSpec{
			TimeZone:        "Asia/Ho_Chi_Minh",
			Mode:            v1alpha1.ScheduleModeEnforce,
			TransitionOrder: v1alpha1.TransitionOrderReleaseFirst,
			Targets: []v1alpha1.ScheduleTarget{
				{Name: "llama70b", WorkloadRef: ref("md-llama70b"), DefaultState: v1alpha1.StateStopped, DefaultAllowDowntime: true},
				{Name: "qwen32b", WorkloadRef: ref("md-qwen32b"), DefaultState: v1alpha1.StateRunning},
			},
			Windows: []v1alpha1.ScheduleWindow{
				{
					Name: "business-hours", Priority: 10,
					Recurring: &v1alpha1.RecurringWindow{Cron: "0 8 * * 1-5", Duration: "10h"},
					States: []v1alpha1.TargetState{
						{Target: "llama70b", DesiredState: v1alpha1.StateRunning},
						{Target: "qwen32b", DesiredState: v1alpha1.StateStopped},
					},
				},
				{
					Name: "maint-wed", Priority: 100,
					OneShot: oneShot("2026-10-21T13:00:00+07:00", "2026-10-21T15:00:00+07:00"),
					States: []v1alpha1.TargetState{
						{Target: "llama70b", DesiredState: v1alpha1.StateStopped, AllowDowntime: ptr.To(true)},
						{Target: "qwen32b", DesiredState: v1alpha1.StateRunning},
					},
				},
			},
		},
	}
}

func ref(name string) v1alpha1.WorkloadReference {
	return v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

func oneShot(from, until string) *v1alpha1.OneShotWindow {
	parse := func(s string) metav1.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return metav1.NewTime(t)
	}
	return &v1alpha1.OneShotWindow{ActiveFrom: parse(from), ActiveUntil: parse(until)}
}

func replicas(n int32) *v1alpha1.Replicas { return ptr.To(v1alpha1.Replicas(n)) }

// summarize reduces errors to "path: type" lines, the part callers rely on.
func summarize(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s: %s", e.Field, e.Type))
	}
	return out
}
