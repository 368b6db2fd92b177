package advisor

import (
	"fmt"
	"maps"
	"slices"
)

// cluster builds snapshots for tests: nodes of one model each.
type cluster struct {
	snap *Snapshot
}

func newCluster(nodes map[string]string, perNode int) *cluster {
	c := &cluster{snap: &Snapshot{Budgets: map[string]int{}, Limits: map[string]map[string]int{}}}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		for i := range perNode {
			c.snap.Devices = append(c.snap.Devices, Device{ID: fmt.Sprintf("%s/gpu-%d", n, i), Node: n, Model: nodes[n]})
		}
	}
	return c
}

// tier accepts every free-of-reservation device of model.
func (c *cluster) tier(model string, count int) Tier {
	t := Tier{Name: model, Model: model, Count: count, Devices: map[string]bool{}}
	for _, d := range c.snap.Devices {
		if d.Model == model {
			t.Devices[d.ID] = true
		}
	}
	return t
}

// run places a running workload on the given devices.
func (c *cluster) run(key, ns string, prio int32, model string, ids ...string) *Workload {
	w := Workload{Key: key, Namespace: ns, Priority: prio, Held: ids,
		Groups: []Group{{Pods: []string{key}, Requests: []Request{{Name: "gpu", Tiers: []Tier{c.tier(model, len(ids))}}}}}}
	for _, id := range ids {
		for i := range c.snap.Devices {
			if c.snap.Devices[i].ID == id {
				c.snap.Devices[i].Holder = key
			}
		}
	}
	c.snap.Running = append(c.snap.Running, w)
	return &c.snap.Running[len(c.snap.Running)-1]
}

// waiting is a unit of one group that needs count devices of model on one node.
func (c *cluster) waiting(key, ns string, model string, count int) *Workload {
	return &Workload{Key: key, Namespace: ns, Groups: []Group{{Pods: []string{key}, Requests: []Request{{Name: "gpu", Tiers: []Tier{c.tier(model, count)}}}}}}
}
