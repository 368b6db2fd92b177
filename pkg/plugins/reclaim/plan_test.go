package reclaim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// cluster is two nodes of 8 H100 where team-b runs b-0 … b-7, two GPUs
// each, created a minute apart: b-0..b-3 fill n1, b-4..b-7 fill n2, and
// b-4..b-7 carry the borrower mark.
type cluster struct {
	snap *advisor.Snapshot
	pods map[string]*v1.Pod
}

func newCluster() *cluster {
	c := &cluster{snap: &advisor.Snapshot{}, pods: map[string]*v1.Pod{}}
	for _, n := range []string{"n1", "n2"} {
		for i := range 8 {
			c.snap.Devices = append(c.snap.Devices, advisor.Device{ID: fmt.Sprintf("%s/gpu-%d", n, i), Node: n, Model: "H100"})
		}
	}
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	for i := range 8 {
		node := "n1"
		if i >= 4 {
			node = "n2"
		}
		slot := (i % 4) * 2
		held := []string{fmt.Sprintf("%s/gpu-%d", node, slot), fmt.Sprintf("%s/gpu-%d", node, slot+1)}
		name := fmt.Sprintf("b-%d", i)
		c.run("team-b", name, 0, held, t0.Add(time.Duration(i)*time.Minute), i >= 4)
	}
	return c
}

func (c *cluster) run(ns, name string, prio int32, held []string, created time.Time, borrower bool) {
	for _, id := range held {
		for i := range c.snap.Devices {
			if c.snap.Devices[i].ID == id {
				c.snap.Devices[i].Holder = ns + "/" + name
			}
		}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)}}
	if borrower {
		pod.Annotations = map[string]string{gpuv1.BorrowedAnnotation: fmt.Sprintf("H100=%d", len(held))}
	}
	c.pods[ns+"/"+name] = pod
	c.snap.Running = append(c.snap.Running, advisor.Workload{Key: ns + "/" + name, Namespace: ns, Priority: prio, Held: held,
		Groups: []advisor.Group{{Pods: []string{ns + "/" + name}, Requests: []advisor.Request{h100Request(c.snap, 2)}}}})
}

func h100Request(snap *advisor.Snapshot, n int) advisor.Request {
	devs := map[string]bool{}
	for _, d := range snap.Devices {
		devs[d.ID] = true
	}
	return advisor.Request{Name: "gpu", Tiers: []advisor.Tier{{Name: "h100", Model: "H100", Count: n, Devices: devs}}}
}

// gang is team-a's gang of two pods of two H100s.
func (c *cluster) gang() *advisor.Workload {
	return &advisor.Workload{Key: "team-a/gang:train", Namespace: "team-a", Groups: []advisor.Group{
		{Pods: []string{"team-a/train-0"}, Requests: []advisor.Request{h100Request(c.snap, 2)}},
		{Pods: []string{"team-a/train-1"}, Requests: []advisor.Request{h100Request(c.snap, 2)}},
	}}
}

func table(guarantees map[string]int32) *gpuquota.Table {
	var qs []*rotav1.GPUQuota
	for ns, g := range guarantees {
		qs = append(qs, &rotav1.GPUQuota{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: rotav1.GPUQuotaSpec{Models: []rotav1.ModelQuota{{Model: "H100", Guaranteed: g}}}})
	}
	t, _ := gpuquota.NewTable(qs, nil)
	return t
}

func victimKeys(p *plan) string {
	var out []string
	for _, v := range p.Victims {
		out = append(out, v.Key)
	}
	return strings.Join(out, ",")
}

func TestPlanTakesNewestBorrowers(t *testing.T) {
	c := newCluster()
	p, why := makePlan(table(map[string]int32{"team-a": 8, "team-b": 8}), c.snap, c.pods, c.gang(), 0)
	if p == nil {
		t.Fatalf("no plan: %s", why)
	}
	if got := victimKeys(p); got != "team-b/b-6,team-b/b-7" {
		t.Errorf("victims %s, want team-b's two newest borrowers b-6 and b-7", got)
	}
	if p.Model != "H100" || p.Need != 4 || p.Used != 0 || p.Guaranteed != 8 {
		t.Errorf("plan numbers %+v", p)
	}
	if v := p.Victims[0]; v.TenantUsed != 16 || v.TenantGuaranteed != 8 {
		t.Errorf("victim's tenant numbers %+v, want 16 used of 8 guaranteed", v)
	}
}

func TestPlanLowestPriorityFirst(t *testing.T) {
	c := newCluster()
	c.snap.Running[4].Priority = -10 // b-4, an older borrower, matters less
	c.snap.Running[5].Priority = -10 // b-5
	p, why := makePlan(table(map[string]int32{"team-a": 8, "team-b": 8}), c.snap, c.pods, c.gang(), 0)
	if p == nil {
		t.Fatalf("no plan: %s", why)
	}
	if got := victimKeys(p); got != "team-b/b-4,team-b/b-5" {
		t.Errorf("victims %s, want the lower-priority borrowers b-4 and b-5", got)
	}
}

func TestPlanNeverBelowTheVictimsGuarantee(t *testing.T) {
	c := newCluster()
	// team-b is guaranteed 14 of its 16: only one 2-GPU workload is
	// reclaimable, and the gang needs 4.
	p, why := makePlan(table(map[string]int32{"team-a": 8, "team-b": 14}), c.snap, c.pods, c.gang(), 0)
	if p != nil {
		t.Fatalf("plan %s takes team-b below its guarantee", victimKeys(p))
	}
	if !strings.Contains(string(why), "would not make room") {
		t.Errorf("why = %q", why)
	}
}

func TestPlanOnlyMarkedBorrowers(t *testing.T) {
	c := newCluster()
	for _, p := range c.pods {
		p.Annotations = nil
	}
	if p, _ := makePlan(table(map[string]int32{"team-a": 8, "team-b": 8}), c.snap, c.pods, c.gang(), 0); p != nil {
		t.Fatalf("plan %s evicts pods that are not marked borrowers", victimKeys(p))
	}
}

func TestPlanNeedsCoverage(t *testing.T) {
	c := newCluster()
	// team-a's guarantee is 2: the 4-GPU gang is not covered, so this is
	// not a reclaim (the caller falls back to priority preemption).
	p, why := makePlan(table(map[string]int32{"team-a": 2, "team-b": 8}), c.snap, c.pods, c.gang(), 0)
	if p != nil || why != "" {
		t.Fatalf("plan %v, why %q: an uncovered unit gets no reclaim and no reason", p, why)
	}
}

func TestPlanTakesAGangWhole(t *testing.T) {
	c := newCluster()
	// b-6 and b-7 are one gang: one workload holding 4 GPUs on n2.
	w6, w7 := c.snap.Running[6], c.snap.Running[7]
	gang := advisor.Workload{Key: "team-b/gang:g", Namespace: "team-b", Held: append(append([]string{}, w6.Held...), w7.Held...),
		Groups: append(append([]advisor.Group{}, w6.Groups...), w7.Groups...)}
	c.snap.Running = append(c.snap.Running[:6], gang)
	p, why := makePlan(table(map[string]int32{"team-a": 8, "team-b": 8}), c.snap, c.pods, c.gang(), 0)
	if p == nil {
		t.Fatalf("no plan: %s", why)
	}
	if got := victimKeys(p); got != "team-b/gang:g" || len(p.Victims[0].Pods) != 2 || p.Victims[0].GPUs != 4 {
		t.Errorf("victims %s (%+v), want the gang whole, both pods", got, p.Victims)
	}
}

func TestPlanRespectsDisruptionBudgets(t *testing.T) {
	c := newCluster()
	// A PodDisruptionBudget allows no disruption of b-7: the plan takes the
	// next newest borrowers instead.
	c.snap.Budgets = map[string]int{"team-b/keep-b7": 0}
	c.snap.Running[7].Budgets = map[string]int{"team-b/keep-b7": 1}
	p, why := makePlan(table(map[string]int32{"team-a": 8, "team-b": 8}), c.snap, c.pods, c.gang(), 0)
	if p == nil {
		t.Fatalf("no plan: %s", why)
	}
	if got := victimKeys(p); strings.Contains(got, "b-7") || len(p.Victims) != 2 {
		t.Errorf("victims %s: want two borrowers other than b-7, whose budget allows no disruption", got)
	}
}

func TestPriorityPlanStaysInTheTenant(t *testing.T) {
	c := newCluster()
	unit := &advisor.Workload{Key: "team-b/urgent", Namespace: "team-b", Priority: 100, Groups: []advisor.Group{
		{Pods: []string{"team-b/urgent"}, Requests: []advisor.Request{h100Request(c.snap, 2)}}}}
	p := makePriorityPlan(c.snap, c.pods, unit, 0)
	if p == nil || len(p.Victims) != 1 || p.Victims[0].Namespace != "team-b" {
		t.Fatalf("plan %+v, want one of team-b's own lower-priority workloads", p)
	}
	if got := p.Victims[0].Key; got != "team-b/b-7" {
		t.Errorf("victim %s, want the newest, b-7", got)
	}
	unit.Namespace, unit.Key = "team-c", "team-c/urgent"
	if p := makePriorityPlan(c.snap, c.pods, unit, 0); p != nil {
		t.Errorf("team-c's pod preempts %s of team-b", victimKeys(p))
	}
}
