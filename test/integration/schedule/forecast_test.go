package schedule

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// waitForecast advances the clock until the schedule's Forecast condition
// has the status, and returns it.
func (e *env) waitForecast(schedule string, status metav1.ConditionStatus) metav1.Condition {
	e.t.Helper()
	var found metav1.Condition
	e.advance("Forecast "+string(status), 60, func() (bool, string) {
		c := meta.FindStatusCondition(e.schedule(schedule).Status.Conditions, v1alpha1.ConditionForecast)
		if c == nil {
			return false, "no Forecast condition"
		}
		found = *c
		return c.Status == status, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
	return found
}

// TestForecastCondition is SPEC §8.1's week on a pool of 10 GPUs, with
// md-bge-embed (2 GPUs) running beside it: the controller's forecast finds
// no over-commit. Adding a third 4-GPU target to business hours, as a user
// would apply it, turns the Forecast condition False with the first
// over-committed window (Monday 08:00-18:00: llama70b 8 + sdxl 4 + bge 2 =
// 14 of 10) and the colliding targets, and emits a Warning event.
func TestForecastCondition(t *testing.T) {
	e := newEnv(t, at(19, 0, 0), map[string]int{"gpu-node-0": 10})
	e.gpuDeployment("md-llama70b", 0, 8)
	e.gpuDeployment("md-qwen32b", 1, 6)
	e.gpuDeployment("md-bge-embed", 1, 2)
	e.gpuDeployment("md-sdxl", 0, 4)
	e.waitReady("md-qwen32b", 1)
	e.waitReady("md-bge-embed", 1)
	e.createSchedule(readExample(t, "deployschedule-week.yaml"))
	e.startController(nil)

	const name = "gpu-pool-h100-shared"
	fits := e.waitForecast(name, metav1.ConditionTrue)
	expectMessage(t, "Forecast", fits.Reason+": "+fits.Message, v1alpha1.ReasonForecastFits, "from Mon 2026-10-19 00:0", "to Mon 2026-10-26 00:0")

	e.updateSchedule(name, func(ds *v1alpha1.DeploySchedule) {
		ds.Spec.Targets = append(ds.Spec.Targets, v1alpha1.ScheduleTarget{Name: "sdxl",
			WorkloadRef:  v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "md-sdxl"},
			DefaultState: v1alpha1.StateStopped})
		for i := range ds.Spec.Windows {
			if ds.Spec.Windows[i].Name == "business-hours" {
				ds.Spec.Windows[i].States = append(ds.Spec.Windows[i].States, v1alpha1.TargetState{Target: "sdxl", DesiredState: v1alpha1.StateRunning})
			}
		}
	})
	over := e.waitForecast(name, metav1.ConditionFalse)
	// By hand: five weekdays, Wednesday split in three by maint-wed.
	expectMessage(t, "Forecast", over.Reason+": "+over.Message, v1alpha1.ReasonForecastOvercommitted,
		"7 over-committed window(s)",
		"H100 Mon 2026-10-19 08:00 +07 to Mon 2026-10-19 18:00 +07 asks for 14 of 10 GPUs (count)",
		"serving/gpu-pool-h100-shared/llama70b, serving/gpu-pool-h100-shared/sdxl",
		"also running: serving/Pod/md-bge-embed-")
	e.waitEvent(name, "Warning", v1alpha1.ReasonForecastOvercommitted, "14 of 10 GPUs")
}
