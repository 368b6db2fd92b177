package advisor

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// outline is a plan as (unit, outcome, disturbed workloads, nodes landed on).
type outline struct {
	Unit, Outcome string
	Disturbed     []string
	On            string
}

func outlineOf(plan []PlannedUnit) []outline {
	var out []outline
	for _, pu := range plan {
		o := outline{Unit: pu.Workload, Outcome: pu.Outcome, On: placedNodes(pu.Placement)}
		if pu.Move != nil {
			for _, st := range pu.Move.Steps {
				o.Disturbed = append(o.Disturbed, st.Action+" "+st.Workload)
			}
		}
		out = append(out, o)
	}
	return out
}

// threeNodes: three nodes of 2 H100, each with one pinned 1-GPU pod of
// team-a, and two 2-GPU gangs waiting.
func threeNodes() (*cluster, *Workload, *Workload) {
	c := newCluster(map[string]string{"n1": "H100", "n2": "H100", "n3": "H100"}, 2)
	for _, n := range []string{"n1", "n2", "n3"} {
		c.run("team-a/a-"+n, "team-a", 0, "H100", n+"/gpu-0").Pinned = "nodeSelector kubernetes.io/hostname=" + n
	}
	return c, c.waiting("team-b/gang:g1", "team-b", "H100", 2), c.waiting("team-c/gang:g2", "team-c", "H100", 2)
}

// Later units see the earlier units' moves: each gang alone would be
// told to drain n1; planned together, the second drains n2.
func TestPlanAllAccountsForEarlierMoves(t *testing.T) {
	c, g1, g2 := threeNodes()
	alone := Advise(c.snap, g2, Options{})
	if alone.Options[0].Placement[0].Node != "n1" {
		t.Fatalf("precondition: g2 alone lands on %s, want n1", alone.Options[0].Placement[0].Node)
	}
	got := outlineOf(PlanAll(c.snap, []*Workload{g1, g2}, Options{}))
	want := []outline{
		{Unit: "team-b/gang:g1", Outcome: OutcomeMove, Disturbed: []string{"evict team-a/a-n1"}, On: "n1"},
		{Unit: "team-c/gang:g2", Outcome: OutcomeMove, Disturbed: []string{"evict team-a/a-n2"}, On: "n2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if len(c.snap.Running) != 3 || c.snap.Devices[0].Holder != "team-a/a-n1" {
		t.Errorf("PlanAll changed its input snapshot")
	}
}

// Higher priority is planned first; equal priorities keep the given order.
func TestPlanAllOrdersByPriority(t *testing.T) {
	c, g1, g2 := threeNodes()
	g2.Priority = 100
	got := outlineOf(PlanAll(c.snap, []*Workload{g1, g2}, Options{}))
	if got[0].Unit != "team-c/gang:g2" || got[0].On != "n1" || got[1].Unit != "team-b/gang:g1" || got[1].On != "n2" {
		t.Errorf("plan %+v, want g2 (priority 100) first on n1, then g1 on n2", got)
	}
}

// A unit that fits now takes the free GPUs in the plan: the next unit is
// planned around it instead of onto the same GPUs.
func TestPlanAllPlacesUnitsThatFit(t *testing.T) {
	c := newCluster(map[string]string{"n1": "H100", "n2": "H100"}, 2)
	c.run("team-a/a-1", "team-a", 0, "H100", "n2/gpu-0")
	fits := c.waiting("team-b/b", "team-b", "H100", 2)
	next := c.waiting("team-c/c", "team-c", "H100", 2)
	got := outlineOf(PlanAll(c.snap, []*Workload{fits, next}, Options{}))
	want := []outline{
		{Unit: "team-b/b", Outcome: OutcomeFits, On: "n1"},
		{Unit: "team-c/c", Outcome: OutcomeMove, Disturbed: []string{"evict team-a/a-1"}, On: "n2"},
	}
	// a-1 has no room anywhere once b takes n1: it is evicted, not moved.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// A budget spent by an earlier unit's move is not spent again: the second
// gang is blocked, naming the budget.
func TestPlanAllSpendsBudgets(t *testing.T) {
	c, g1, g2 := threeNodes()
	for i := range c.snap.Running {
		c.snap.Running[i].Budgets = map[string]int{"team-a/serving": 1}
	}
	c.snap.Budgets["team-a/serving"] = 1
	plan := PlanAll(c.snap, []*Workload{g1, g2}, Options{})
	if plan[0].Outcome != OutcomeMove || plan[0].Move.Steps[0].Budget != "PodDisruptionBudget team-a/serving allows 1" {
		t.Fatalf("first unit: %+v, want a move using team-a/serving", plan[0])
	}
	if plan[1].Outcome != OutcomeBlocked || !strings.Contains(plan[1].Reason, "PodDisruptionBudget team-a/serving (0 disruptions allowed") {
		t.Errorf("second unit: %s %q, want blocked by the spent budget", plan[1].Outcome, plan[1].Reason)
	}
}

// A workload moved by an earlier step lands where its move said (taking
// that GPU) and is not disturbed again.
func TestPlanAllMovedWorkloadsStay(t *testing.T) {
	c := newCluster(map[string]string{"n1": "H100", "n2": "H100", "n3": "H100"}, 2)
	c.run("team-a/a-1", "team-a", 0, "H100", "n1/gpu-0")
	c.run("team-c/c-2", "team-c", 10, "H100", "n2/gpu-0")
	c.run("team-c/c-3", "team-c", 10, "H100", "n2/gpu-1")
	c.run("team-c/c-4", "team-c", 0, "H100", "n3/gpu-0")
	g1 := c.waiting("team-b/g1", "team-b", "H100", 2)
	g2 := c.waiting("team-b/g2", "team-b", "H100", 1)
	plan := PlanAll(c.snap, []*Workload{g1, g2}, Options{})
	got := outlineOf(plan)
	want := []outline{
		// a-1 moves to n3/gpu-1, the only free GPU off n1.
		{Unit: "team-b/g1", Outcome: OutcomeMove, Disturbed: []string{"move team-a/a-1"}, On: "n1"},
		// Nothing is free now; a-1 (cheaper by name than c-4) was moved
		// already, so c-4 goes.
		{Unit: "team-b/g2", Outcome: OutcomeMove, Disturbed: []string{"evict team-c/c-4"}, On: "n3"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
