package waits

import (
	"testing"
	"time"
)

func TestReclaimDetailDescribe(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	until := start.Add(90 * time.Second)
	d := ReclaimDetail{Tenant: "team-a", Unit: "team-a/gang:train", Model: "H100", Need: 4, Used: 0, Guaranteed: 8, Started: start,
		Victims: []ReclaimVictim{
			{Workload: "team-b/b-7", Pods: []string{"team-b/b-7"}, GPUs: 2, GraceUntil: &until},
			{Workload: "team-b/b-6", Pods: []string{"team-b/b-6"}, GPUs: 2},
		}}
	gone := func(v ReclaimVictim) bool { return v.Workload == "team-b/b-6" }
	for _, tc := range []struct {
		at   time.Duration
		gone func(ReclaimVictim) bool
		want string
	}{
		{18 * time.Second, nil, "reclaiming 4 H100 for team-a's guarantee (holds 0 of 8, needs 4) from borrowers team-b/b-7 (2 GPUs; checkpoint grace 1m12s left), team-b/b-6 (2 GPUs; evicting)"},
		{30 * time.Second, gone, "reclaiming 4 H100 for team-a's guarantee (holds 0 of 8, needs 4) from borrowers team-b/b-7 (2 GPUs; checkpoint grace 1m0s left), team-b/b-6 (2 GPUs; evicted)"},
		{2 * time.Minute, gone, "reclaiming 4 H100 for team-a's guarantee (holds 0 of 8, needs 4) from borrowers team-b/b-7 (2 GPUs; evicting), team-b/b-6 (2 GPUs; evicted)"},
	} {
		if got := d.Describe(start.Add(tc.at), tc.gone); got != tc.want {
			t.Errorf("at +%s:\n got %s\nwant %s", tc.at, got, tc.want)
		}
	}
}
