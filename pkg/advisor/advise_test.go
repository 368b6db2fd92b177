package advisor

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func kinds(a Advice) []Kind {
	var out []Kind
	for _, o := range a.Options {
		out = append(out, o.Kind)
	}
	return out
}

// fragmentation is the fragmentation scenario
// (docs/design.md#scenario-fragmentation) at t=10: a-1 on n2, a-2 on n1, one GPU free
// on each node, B's 2-GPU gang (one claim) waits.
func fragmentation() (*cluster, *Workload) {
	c := newCluster(map[string]string{"n1": "H100", "n2": "H100"}, 2)
	c.run("team-a/a-1", "team-a", 0, "H100", "n2/gpu-0").Pinned = "nodeSelector kubernetes.io/hostname=n2"
	c.run("team-a/a-2", "team-a", 0, "H100", "n1/gpu-0").Pinned = "nodeSelector kubernetes.io/hostname=n1"
	c.snap.Limits = map[string]map[string]int{"team-a": {"H100": 2}, "team-b": {"H100": 2}}
	b := c.waiting("team-b/gang:ranks", "team-b", "H100", 2)
	b.Groups[0].Pods = []string{"team-b/b-rank-0", "team-b/b-rank-1"}
	return c, b
}

func TestAdviseKinds(t *testing.T) {
	at := time.Date(2026, 10, 19, 18, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		build    func() (*Snapshot, *Workload)
		want     []Kind
		contains string
	}{
		"move: the drain of A's replica on n1 admits B": {
			build: func() (*Snapshot, *Workload) { c, b := fragmentation(); return c.snap, b },
			want:  []Kind{KindMove, KindMove},
			// Both nodes need one eviction; n1 comes first by name.
			contains: "evict team-a/a-2 (1 × H100) on n1 (nodeSelector kubernetes.io/hostname=n1) → fits on n1",
		},
		"move to another node when the moved pod has room there": {
			build: func() (*Snapshot, *Workload) {
				c := newCluster(map[string]string{"n1": "H100", "n2": "H100", "n3": "H100"}, 2)
				c.run("team-a/a-1", "team-a", 0, "H100", "n1/gpu-0")
				c.run("team-c/c-1", "team-c", 0, "H100", "n2/gpu-0")
				c.run("team-c/c-2", "team-c", 0, "H100", "n2/gpu-1")
				c.run("team-c/c-3", "team-c", 0, "H100", "n3/gpu-0")
				return c.snap, c.waiting("team-b/b", "team-b", "H100", 2)
			},
			want:     []Kind{KindMove, KindMove, KindMove},
			contains: "move team-a/a-1 (1 × H100) from n1 to n3 → fits on n1",
		},
		"none: a PodDisruptionBudget pins A's replicas": {
			build: func() (*Snapshot, *Workload) {
				c, b := fragmentation()
				for i := range c.snap.Running {
					c.snap.Running[i].Budgets = map[string]int{"team-a/serving": 1}
				}
				c.snap.Budgets["team-a/serving"] = 0
				return c.snap, b
			},
			want:     []Kind{KindNone},
			contains: "n1: team-a/a-2 is protected by PodDisruptionBudget team-a/serving (0 disruptions allowed",
		},
		"quota: the limit change that admits it": {
			build: func() (*Snapshot, *Workload) {
				c := newCluster(map[string]string{"n1": "H100"}, 4)
				c.run("team-b/b-0", "team-b", 0, "H100", "n1/gpu-0")
				c.snap.Limits = map[string]map[string]int{"team-b": {"H100": 2}}
				return c.snap, c.waiting("team-b/b-1", "team-b", "H100", 2)
			},
			want:     []Kind{KindQuota},
			contains: "team-b H100 limit 2 → 3",
		},
		"tier: another model free now": {
			build: func() (*Snapshot, *Workload) {
				c := newCluster(map[string]string{"n1": "H100", "n2": "A100"}, 2)
				c.run("team-a/a-1", "team-a", 0, "H100", "n1/gpu-0", "n1/gpu-1")
				c.snap.Budgets["team-a/pdb"] = 0
				c.snap.Running[0].Budgets = map[string]int{"team-a/pdb": 1}
				c.snap.Models = []Tier{c.tier("H100", 1), c.tier("A100", 1)}
				return c.snap, c.waiting("team-b/b", "team-b", "H100", 2)
			},
			want:     []Kind{KindTier},
			contains: "accept A100 as another tier: free now on n2",
		},
		"wait: a DeploySchedule boundary frees the node": {
			build: func() (*Snapshot, *Workload) {
				c := newCluster(map[string]string{"n1": "H100"}, 4)
				c.run("team-a/llama", "team-a", 0, "H100", "n1/gpu-0", "n1/gpu-1", "n1/gpu-2", "n1/gpu-3").Fixed = "test"
				c.snap.Releases = []Release{{At: at, Source: "DeploySchedule team-a/business-hours", Workloads: []string{"team-a/llama"}}}
				return c.snap, c.waiting("team-b/b", "team-b", "H100", 4)
			},
			want:     []Kind{KindWait},
			contains: "wait until 2026-10-19T18:00:00Z: DeploySchedule team-a/business-hours frees capacity",
		},
		"wait: a reservation ending unblocks its GPUs": {
			build: func() (*Snapshot, *Workload) {
				c := newCluster(map[string]string{"n1": "H100"}, 2)
				b := c.waiting("team-b/b", "team-b", "H100", 2)
				tr := &b.Groups[0].Requests[0].Tiers[0]
				tr.Blocked = map[string]string{"n1/gpu-1": "reserved by team-a/hold"}
				delete(tr.Devices, "n1/gpu-1")
				c.snap.Releases = []Release{{At: at, Source: "GPUReservation team-a/hold ends", Unblocks: []string{"n1/gpu-1"}}}
				return c.snap, b
			},
			want:     []Kind{KindWait},
			contains: "GPUReservation team-a/hold ends",
		},
		"none: the pool lacks the devices": {
			build: func() (*Snapshot, *Workload) {
				c := newCluster(map[string]string{"n1": "H100"}, 2)
				return c.snap, c.waiting("team-b/b", "team-b", "H100", 4)
			},
			want:     []Kind{KindNone},
			contains: "n1: too few GPUs even if every holder left (2 of 4 H100 usable)",
		},
		"fits now: no options": {
			build: func() (*Snapshot, *Workload) {
				c := newCluster(map[string]string{"n1": "H100"}, 2)
				return c.snap, c.waiting("team-b/b", "team-b", "H100", 2)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap, unit := tc.build()
			a := Advise(snap, unit, Options{})
			if diff := cmp.Diff(tc.want, kinds(a)); diff != "" {
				t.Fatalf("kinds (-want +got):\n%s\nadvice: %+v", diff, a)
			}
			if tc.contains == "" {
				return
			}
			var all []string
			for _, o := range a.Options {
				all = append(all, o.Summary)
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.contains) {
				t.Errorf("no option says %q:\n%s", tc.contains, strings.Join(all, "\n"))
			}
		})
	}
}

func TestAdviseOrdersPlans(t *testing.T) {
	// n1 frees with one 1-GPU pod of priority 10; n2 with one of priority
	// 0; n3 needs two pods moved. Equal GPUs: lower priority first.
	c := newCluster(map[string]string{"n1": "H100", "n2": "H100", "n3": "H100", "n4": "H100"}, 2)
	c.run("team-a/hi", "team-a", 10, "H100", "n1/gpu-0")
	c.run("team-a/lo", "team-a", 0, "H100", "n2/gpu-0")
	c.run("team-c/x", "team-c", 0, "H100", "n3/gpu-0")
	c.run("team-c/y", "team-c", 0, "H100", "n3/gpu-1")
	c.run("team-c/z", "team-c", 0, "H100", "n4/gpu-0")
	c.run("team-d/w", "team-d", 0, "H100", "n4/gpu-1")
	a := Advise(c.snap, c.waiting("team-b/b", "team-b", "H100", 2), Options{MaxPlans: 4})
	var got []int
	var first []string
	for _, o := range a.Options {
		got = append(got, o.GPUs)
		first = append(first, o.Steps[0].Workload)
	}
	if diff := cmp.Diff([]int{1, 1, 2, 2}, got); diff != "" {
		t.Errorf("GPUs per plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"team-a/lo", "team-a/hi", "team-c/x", "team-c/z"}, first); diff != "" {
		t.Errorf("first step per plan (-want +got):\n%s", diff)
	}
}

func TestAdviseTruncates(t *testing.T) {
	c := newCluster(map[string]string{"n1": "H100"}, 8)
	for i := range 8 {
		c.run("team-a/p"+string(rune('0'+i)), "team-a", 0, "H100", "n1/gpu-"+string(rune('0'+i)))
	}
	a := Advise(c.snap, c.waiting("team-b/b", "team-b", "H100", 8), Options{MaxChecks: 5})
	if !a.Truncated || a.Checks != 5 {
		t.Fatalf("want a truncated search after 5 checks, got truncated=%v checks=%d", a.Truncated, a.Checks)
	}
	for _, o := range a.Options {
		if o.Kind == KindNone {
			t.Errorf("a truncated search must not claim none: %s", o.Summary)
		}
	}
}
