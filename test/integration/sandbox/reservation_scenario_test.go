package sandbox

import (
	"strings"
	"testing"

	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/sandbox/report"
	"github.com/rota-dev/rota/pkg/sandbox/scenario"
)

// budgetMiB is an H200's 143,771 MiB × 0.95, floored (docs/reservations.md, "VRAM budget").
const budgetMiB = 136582

// TestScenarioReservationH200 plays the H200 reservation scenario (docs/design.md#scenario-h200-reservation) with the real driver on an
// hgx-h200 node published with consumable memory: the members of a
// time-sliced GPUReservation share the one held H200, a DeploySchedule
// swaps the day and the night member around the always-on one, a fourth
// member that would pass the budget waits, and non-members never get the
// held GPU. Besides every checkpoint's expectations it checks what the
// scenario format cannot say: the device each pod holds, by UUID.
func TestScenarioReservationH200(t *testing.T) {
	rep := playScenario(t, "reservation-h200")
	if !rep.Passed {
		t.Error("report says FAIL")
	}
	held := gpu.MockUUID("h200-0", 0)
	if got := publishedUUID(rep, "h200-0", "gpu-0"); got != held {
		t.Fatalf("h200-0/gpu-0 published as %q, want the mock UUID %s", got, held)
	}
	// Members running at each checkpoint, in order.
	shifts := map[string][]string{
		"mon-0700-night-b-and-c":    {"md-b", "md-c"},
		"mon-1000-business-a-and-c": {"md-a", "md-c"},
		"mon-1900-night-b-and-c":    {"md-b", "md-c"},
		"tue-1000-business-a-and-c": {"md-a", "md-c"},
	}
	memory := map[string]int64{"md-a": 6144, "md-b": 4096, "md-c": 61440}
	for _, cp := range rep.Checkpoints {
		running, ok := shifts[cp.Name]
		if !ok {
			t.Errorf("unexpected checkpoint %s", cp.Name)
			continue
		}
		var wantUsed int64
		for _, w := range running {
			wantUsed += memory[w]
			pods := podsOf(cp, "team-a/"+w)
			if len(pods) != 1 {
				t.Errorf("%s: %d pods of %s, want 1", cp.Name, len(pods), w)
				continue
			}
			if d := pods[0].Devices; len(d) != 1 || d[0].UUID != held || d[0].Node != "h200-0" || d[0].Name != "gpu-0" {
				t.Errorf("%s: member %s holds %+v, want only the held GPU h200-0/gpu-0 (%s)", cp.Name, pods[0].Name, d, held)
			}
		}
		for _, w := range []string{"md-embed"} {
			for _, p := range podsOf(cp, "team-a/"+w) {
				for _, d := range p.Devices {
					if d.UUID == held {
						t.Errorf("%s: non-member %s holds the reserved GPU %s", cp.Name, p.Name, held)
					}
				}
			}
		}
		for _, w := range []string{"md-d", "md-intruder"} {
			for _, p := range podsOf(cp, "team-a/"+w) {
				if len(p.Devices) != 0 || p.Node != "" {
					t.Errorf("%s: %s placed on %q with %+v, want it waiting", cp.Name, p.Name, p.Node, p.Devices)
				}
			}
		}
		if d := podsOf(cp, "team-a/md-d"); len(d) == 1 && d[0].Waiting != nil &&
			!strings.Contains(d[0].Waiting.Message, "this pod (member d) asks 75776 MiB") {
			t.Errorf("%s: member d waits with %q, want the budget arithmetic", cp.Name, d[0].Waiting.Message)
		}
		res := reservationOf(cp, "team-a/serving")
		if res == nil {
			t.Errorf("%s: no reservation team-a/serving", cp.Name)
			continue
		}
		if res.BudgetTotalMiB != budgetMiB || res.GPUs != 1 {
			t.Errorf("%s: reservation budget %d MiB on %d GPU(s), want %d on 1", cp.Name, res.BudgetTotalMiB, res.GPUs, budgetMiB)
		}
		if res.BudgetUsedMiB != wantUsed || res.BudgetUsedMiB > budgetMiB {
			t.Errorf("%s: members use %d MiB, want %d (running %v) and at most %d", cp.Name, res.BudgetUsedMiB, wantUsed, running, budgetMiB)
		}
	}
	// Business hours Monday and Tuesday at 08:00, night at 18:00: each a
	// release of the outgoing member before the start of the incoming one.
	if len(rep.Transitions) != 3 {
		t.Fatalf("%d transitions, want 3 (Mon 08:00, Mon 18:00, Tue 08:00)", len(rep.Transitions))
	}
	for i, tr := range rep.Transitions {
		local := tr.At.In(rep.Start.Location())
		wantHour := []int{8, 18, 8}[i]
		if local.Hour() != wantHour || local.Minute() != 0 {
			t.Errorf("transition %d at %s, want %02d:00", i, local, wantHour)
		}
	}
	assertReleaseFirst(t, rep)
	// One GPU shared by the members, one for the ordinary pod.
	if rep.MaxGPUsInUse != 2 {
		t.Errorf("%d GPUs in use at most, want 2", rep.MaxGPUsInUse)
	}
}

// TestScenarioReservationNodeOption: a node's consumableMemory is a
// boolean; anything else is refused with the field named.
func TestScenarioReservationNodeOption(t *testing.T) {
	base := "name: x\nstart: \"2026-10-19T06:00:00+07:00\"\nnodes:\n- {name: h200-0, profile: hgx-h200, consumableMemory: %s}\n"
	sc, err := scenario.Parse([]byte(strings.Replace(base, "%s", "true", 1)))
	if err != nil {
		t.Fatalf("consumableMemory: true refused: %v", err)
	}
	if !sc.Nodes[0].ConsumableMemory {
		t.Error("consumableMemory: true not read")
	}
	_, err = scenario.Parse([]byte(strings.Replace(base, "%s", `"yes"`, 1)))
	if err == nil || !strings.Contains(err.Error(), "consumableMemory") {
		t.Errorf("consumableMemory: \"yes\" = %v, want an error naming the field", err)
	}
}

func publishedUUID(rep *report.Report, node, device string) string {
	for _, n := range rep.Nodes {
		for _, g := range n.GPUs {
			if g.Node == node && g.Name == device {
				return g.UUID
			}
		}
	}
	return ""
}

// podsOf returns the checkpoint's pods of a workload that are not
// terminating.
func podsOf(cp report.Checkpoint, workload string) []report.Pod {
	var out []report.Pod
	for _, p := range cp.Pods {
		if p.Workload == workload && p.Phase != "Terminating" {
			out = append(out, p)
		}
	}
	return out
}

func reservationOf(cp report.Checkpoint, name string) *report.Reservation {
	for i := range cp.Reservations {
		if cp.Reservations[i].Name == name {
			return &cp.Reservations[i]
		}
	}
	return nil
}
