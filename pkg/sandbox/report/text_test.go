package report

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestWriteText(t *testing.T) {
	start := time.Date(2026, 10, 19, 9, 0, 0, 0, time.FixedZone("", 7*3600))
	r := &Report{
		Scenario: "swap", Start: start, End: start.Add(time.Hour), WallSeconds: 12.34,
		Nodes: []Node{{Name: "n1", Profile: "mixed", GPUs: []GPU{{Model: "H100"}, {Model: "L4"}, {Model: "H100"}}}},
		Checkpoints: []Checkpoint{{
			Name: "morning", Time: start.Add(30 * time.Minute), Offset: "30m", GPUsInUse: 1, Failures: []string{"pods ml/x: none"},
			Pods: []Pod{
				{Name: "ml/a", Phase: "Running", Ready: true, Node: "n1", Devices: []Device{{Name: "gpu-0", Model: "H100", UUID: "GPU-0"}}},
				{Name: "ml/b", Phase: "Pending", Waiting: &Waiting{Code: "InsufficientCapacity", Reason: "Unschedulable", Message: "no\n  free GPU"}},
			},
			Targets:      []Target{{Schedule: "ml/s", Target: "a", Phase: "Converged", Reason: "Done", DesiredState: "Running", Source: "day"}},
			Reservations: []Reservation{{Name: "ml/r", Phase: "Bound", GPUs: 1, BudgetUsedMiB: 2048, BudgetTotalMiB: 4096}},
			Transitions:  []Transition{{Schedule: "ml/s", At: start.Add(10 * time.Minute), Steps: []Step{{Action: "scale", Target: "a", Replicas: ptr.To[int32](2), Phase: "Converged"}}}},
		}},
		Transitions: []Transition{{}}, MaxGPUsInUse: 1, Timeline: "swap.html", Passed: false,
	}
	var b strings.Builder
	r.WriteText(&b)
	want := `Scenario swap: Mon 2026-10-19 09:00:00 → Mon 2026-10-19 10:00:00 (simulated), 12.3s wall time
  node n1 (mixed): 2× H100, 1× L4

== checkpoint morning at Mon 2026-10-19 09:30:00 (+30m) — FAIL, 1 GPUs in use
   ✗ pods ml/x: none
  pods:
    ml/a                                     Running      Ready on n1 [gpu-0 H100 GPU-0]
    ml/b                                     Pending     
      waiting [InsufficientCapacity]: Unschedulable: no free GPU
  schedule targets:
    ml/s a            Converged  Done (want Running from day)
  reservations:
    ml/r Bound: 1 GPU(s), budget 2048/4096 MiB
  transitions since the previous checkpoint:
    Mon 2026-10-19 09:10:00 ml/s: scale a (2) Converged

1 transitions in all; at most 1 GPUs in use at once
timeline: swap.html
RESULT: FAIL
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
