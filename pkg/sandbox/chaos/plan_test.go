package chaos

import (
	"reflect"
	"testing"
	"time"
)

func TestPlanKillsReplaysFromItsSeed(t *testing.T) {
	timing := Timing{MinGap: 100 * time.Millisecond, MaxGap: 2 * time.Second, MaxDown: time.Second}
	a := PlanKills(42, 200, 7, timing)
	b := PlanKills(42, 200, 7, timing)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two different plans")
	}
	if c := PlanKills(43, 200, 7, timing); reflect.DeepEqual(a, c) {
		t.Error("seeds 42 and 43 gave the same plan")
	}
	hit := map[int]bool{}
	for i, k := range a {
		if k.After < timing.MinGap || k.After > timing.MaxGap || k.Down < 0 || k.Down > timing.MaxDown || k.Victim < 0 || k.Victim >= 7 {
			t.Errorf("kill %d = %+v is outside %+v with 7 victims", i, k, timing)
		}
		hit[k.Victim] = true
	}
	if len(hit) != 7 {
		t.Errorf("200 kills hit %d of 7 components", len(hit))
	}
}
