package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
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

// TestForecastCondition is the week-swap scenario's week
// (docs/design.md#scenario-week-swap) on a pool of 10 GPUs, with
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
	expectMessage(t, "Forecast", fits.Reason+": "+fits.Message, v1alpha1.ReasonForecastFits, "in the next 7 days")

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
		"7 over-committed window(s) in the next 7 days",
		"H100 Mon 2026-10-19 08:00 +07 to Mon 2026-10-19 18:00 +07 asks for 14 of 10 GPUs (count)",
		"serving/gpu-pool-h100-shared/llama70b, serving/gpu-pool-h100-shared/sdxl",
		"also running: serving/Pod/md-bge-embed-")
	e.waitEvent(name, "Warning", v1alpha1.ReasonForecastOvercommitted, "14 of 10 GPUs")

	// kubectl rota forecast reads the same cluster and gives the windows
	// as JSON lines.
	out := runKubectlRota(t, e.cp, "forecast", "-o", "json", "--from", "2026-10-19T00:00:00+07:00", "--to", "2026-10-26T00:00:00+07:00")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec struct {
			Type, From, To, Reason string
			Demand, Capacity       int
			Targets, Others        []string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("kubectl rota forecast: line %q: %v", line, err)
		}
		if rec.Type != "overcommit" {
			continue
		}
		if len(rec.Others) != 1 || !strings.HasPrefix(rec.Others[0], "serving/Pod/md-bge-embed-") {
			t.Errorf("over-commit %s: others %v, want md-bge-embed's pod", rec.From, rec.Others)
		}
		got = append(got, fmt.Sprintf("%s %s %d/%d %s %s", rec.From[5:16], rec.To[11:16], rec.Demand, rec.Capacity, rec.Reason, strings.Join(rec.Targets, ",")))
	}
	day := "serving/gpu-pool-h100-shared/llama70b,serving/gpu-pool-h100-shared/sdxl"
	want := []string{
		"10-19T08:00 18:00 14/10 count " + day,
		"10-20T08:00 18:00 14/10 count " + day,
		"10-21T08:00 13:00 14/10 count " + day,
		"10-21T13:00 15:00 12/10 count serving/gpu-pool-h100-shared/qwen32b,serving/gpu-pool-h100-shared/sdxl",
		"10-21T15:00 18:00 14/10 count " + day,
		"10-22T08:00 18:00 14/10 count " + day,
		"10-23T08:00 18:00 14/10 count " + day,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("kubectl rota forecast over-commits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// runKubectlRota runs kubectl-rota (framework.Binary) against the control
// plane.
func runKubectlRota(t *testing.T, cp *framework.ControlPlane, args ...string) string {
	t.Helper()
	bin := framework.Binary(t, "kubectl-rota")
	cmd := exec.Command(bin, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl rota %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
