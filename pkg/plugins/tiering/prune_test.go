package tiering

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// probeHandle is the framework handle as Tiering's witness search sees it:
// RunFilterPlugins runs the other Filter plugins of the test (blocked, then
// DynamicResources), and nominated names the nodes with nominated pods.
type probeHandle struct {
	fwk.Handle
	e         *env
	blocked   map[string]bool
	nominated map[string]bool
	probes    int
}

func (h *probeHandle) RunFilterPlugins(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	h.probes++
	return h.e.otherFilters(ctx, cs, pod, ni, h.blocked)
}

func (h *probeHandle) NominatedPodsForNode(node string) []fwk.PodInfo {
	if h.nominated[node] {
		return []fwk.PodInfo{nil}
	}
	return nil
}

// otherFilters are the Filter plugins after Tiering: a stand-in for
// NodeResourcesFit and the like that rejects the blocked nodes, then
// DynamicResources.
func (e *env) otherFilters(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, blocked map[string]bool) *fwk.Status {
	if blocked[ni.Node().Name] {
		return fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu")
	}
	return e.dr.Filter(ctx, cs, pod, ni)
}

// outcome is one scheduling cycle as the framework runs it, Tiering's
// Filter first: the chosen node (highest Tiering score), and how many
// nodes DynamicResources' Filter visited and Tiering's pruned.
type outcome struct {
	node           string
	draVisits      int
	pruned, probes int
	statuses       map[string]*fwk.Status
}

// pruningCycle runs one cycle for pod with pruning on or off.
func (e *env) pruningCycle(t testing.TB, pod *v1.Pod, prune bool, blocked, nominated map[string]bool) outcome {
	t.Helper()
	h := &probeHandle{Handle: e.tiering.handle, e: e, blocked: blocked, nominated: nominated}
	pl := *e.tiering
	pl.handle = h
	pl.args = &TieringArgs{PolicyVersion: "test-v1", DisablePruning: !prune}
	cs := framework.NewCycleState()
	if _, st := e.dr.PreFilter(e.ctx, cs, pod, e.nodeInfos); !st.IsSuccess() {
		t.Fatalf("DynamicResources PreFilter: %v", st)
	}
	if _, st := pl.PreFilter(e.ctx, cs, pod, e.nodeInfos); !st.IsSuccess() {
		t.Fatalf("Tiering PreFilter: %v", st)
	}
	out := outcome{statuses: map[string]*fwk.Status{}}
	var feasible []fwk.NodeInfo
	for _, ni := range e.nodeInfos {
		name := ni.Node().Name
		if st := pl.Filter(e.ctx, cs, pod, ni); !st.IsSuccess() {
			st.SetPlugin(Name)
			out.statuses[name] = st
			out.pruned++
			continue
		}
		if !blocked[name] {
			out.draVisits++
		}
		if st := e.otherFilters(e.ctx, cs, pod, ni, blocked); !st.IsSuccess() {
			out.statuses[name] = st
			continue
		}
		feasible = append(feasible, ni)
	}
	out.probes = h.probes
	if len(feasible) == 0 {
		return out
	}
	if st := pl.PreScore(e.ctx, cs, pod, feasible); !st.IsSuccess() {
		t.Fatalf("Tiering PreScore: %v", st)
	}
	best := int64(-1)
	for _, ni := range feasible {
		s, st := pl.Score(e.ctx, cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		if s > best {
			best, out.node = s, ni.Node().Name
		}
	}
	return out
}

// pruningCluster: 3 H100 nodes (8, 4 and 2 GPUs: the 2-GPU one is the best
// fit), 3 A100 nodes, 3 L4 nodes, and an A100 node whose pool has slices
// of two generations (not rankable by counting).
func pruningCluster(t testing.TB) *env {
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	add := func(name string, s *resourceapi.ResourceSlice) {
		nodes = append(nodes, testNode(name))
		slices = append(slices, s)
	}
	for i, n := range []int{8, 4, 2} {
		add(fmt.Sprintf("h100-%d", i), testSlice(fmt.Sprintf("h100-%d", i), gpus("H100", 80, n)...))
		add(fmt.Sprintf("a100-%d", i), testSlice(fmt.Sprintf("a100-%d", i), gpus("A100", 80, n)...))
		add(fmt.Sprintf("l4-%d", i), testSlice(fmt.Sprintf("l4-%d", i), gpus("L4", 24, n)...))
	}
	// A driver restart leaves a slice of the pool's previous generation
	// behind for a moment: the allocator uses the newest one; counting
	// does not rank the node.
	stale := testSlice("a100-twogen", gpus("A100", 80, 1)...)
	stale.Name += "-stale"
	current := testSlice("a100-twogen", gpus("A100", 80, 1)...)
	current.Spec.Pool.Generation = 1
	add("a100-twogen", current)
	slices = append(slices, stale)
	return newEnv(t, nodes, slices, []*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100", "A100")})
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// TestPruning checks, cycle by cycle, that the pruned path chooses the
// node the unpruned one does, and which nodes it keeps from the other
// Filter plugins.
func TestPruning(t *testing.T) {
	e := pruningCluster(t)
	pod := testPod("p")
	allH100 := set("h100-0", "h100-1", "h100-2")
	tests := map[string]struct {
		blocked, nominated map[string]bool
		wantNode           string
		// wantPruned are the nodes Tiering's Filter rejects.
		wantPruned []string
	}{
		"best tier free: only H100 nodes (and the unrankable one) reach DynamicResources": {
			wantNode:   "h100-2",
			wantPruned: []string{"a100-0", "a100-1", "a100-2", "l4-0", "l4-1", "l4-2"},
		},
		"best-fit H100 node blocked: another H100 node": {
			blocked:    set("h100-2"),
			wantNode:   "h100-1",
			wantPruned: []string{"a100-0", "a100-1", "a100-2", "l4-0", "l4-1", "l4-2"},
		},
		"every H100 node blocked by another filter: A100 in the same cycle, L4 pruned": {
			blocked:    allH100,
			wantNode:   "a100-2",
			wantPruned: []string{"l4-0", "l4-1", "l4-2"},
		},
		"only the unrankable A100 node passes: nothing pruned": {
			blocked:  set("h100-0", "h100-1", "h100-2", "a100-0", "a100-1", "a100-2"),
			wantNode: "a100-twogen",
		},
		"nothing passes: nothing pruned, every node filtered": {
			blocked: set("h100-0", "h100-1", "h100-2", "a100-0", "a100-1", "a100-2", "a100-twogen"),
		},
		"the only free H100 nodes have nominated pods: not witnesses": {
			blocked:    set("h100-0"),
			nominated:  set("h100-1", "h100-2"),
			wantNode:   "h100-2",
			wantPruned: []string{"l4-0", "l4-1", "l4-2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			on := e.pruningCycle(t, pod, true, tc.blocked, tc.nominated)
			off := e.pruningCycle(t, pod, false, tc.blocked, tc.nominated)
			if on.node != tc.wantNode || off.node != tc.wantNode {
				t.Errorf("chosen node: %q with pruning, %q without; want %q", on.node, off.node, tc.wantNode)
			}
			var pruned []string
			for node, st := range on.statuses {
				if st.Plugin() == Name {
					pruned = append(pruned, node)
				}
			}
			slices.Sort(pruned)
			if !slices.Equal(pruned, tc.wantPruned) {
				t.Errorf("pruned %v, want %v", pruned, tc.wantPruned)
			}
			if off.pruned != 0 || off.probes != 0 {
				t.Errorf("with pruning off: %d nodes pruned, %d probes", off.pruned, off.probes)
			}
			if len(tc.wantPruned) == 0 {
				// Nothing pruned: every node's status is the one the
				// unpruned cycle gives, so PostFilter explains alike.
				if !maps.EqualFunc(on.statuses, off.statuses, func(a, b *fwk.Status) bool { return a.Equal(b) }) {
					t.Errorf("statuses with pruning %v, without %v", on.statuses, off.statuses)
				}
			}
		})
	}
}

// TestPruningGivesUp: with more blocked best-tier nodes than the witness
// search probes, nothing is pruned and the choice is unchanged.
func TestPruningGivesUp(t *testing.T) {
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	blocked := map[string]bool{}
	for i := range maxPruneProbes + 2 {
		name := fmt.Sprintf("h100-%03d", i)
		nodes, slices = append(nodes, testNode(name)), append(slices, testSlice(name, gpus("H100", 80, 1)...))
		blocked[name] = true
	}
	for _, name := range []string{"a100-0", "l4-0"} {
		nodes = append(nodes, testNode(name))
		slices = append(slices, testSlice(name, gpus(map[string]string{"a100-0": "A100", "l4-0": "L4"}[name], 80, 1)...))
	}
	e := newEnv(t, nodes, slices, []*resourceapi.ResourceClaim{tieredClaim("p", 1, "H100", "A100")})
	on := e.pruningCycle(t, testPod("p"), true, blocked, nil)
	if on.node != "a100-0" || on.pruned != 0 || on.probes != maxPruneProbes {
		t.Errorf("chose %q, pruned %d nodes after %d probes; want a100-0, none pruned after %d probes", on.node, on.pruned, on.probes, maxPruneProbes)
	}
}

// TestPruningNotForNominatedPodsOrMembers: a pod nominated to a node is
// not pruned: the framework tries that node alone first and takes it if it
// fits, whatever its tier, so pruning must not reject it. Nor is a
// GPUReservation's member (its claim tolerates the reservation's taint):
// Reservation limits it to one node already.
func TestPruningNotForNominatedPodsOrMembers(t *testing.T) {
	e := pruningCluster(t)
	nominated := testPod("p")
	nominated.Status.NominatedNodeName = "l4-0"
	if on := e.pruningCycle(t, nominated, true, nil, nil); on.pruned != 0 || on.probes != 0 {
		t.Errorf("nominated pod: %d nodes pruned, %d probes; want none", on.pruned, on.probes)
	}

	member := tieredClaim("m", 1, "H100", "A100")
	for i := range member.Spec.Devices.Requests[0].FirstAvailable {
		member.Spec.Devices.Requests[0].FirstAvailable[i].Tolerations = []resourceapi.DeviceToleration{{
			Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual, Value: "default.hold", Effect: resourceapi.DeviceTaintEffectNoSchedule,
		}}
	}
	if _, err := e.client.ResourceV1().ResourceClaims(member.Namespace).Create(e.ctx, member, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(e.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := e.tiering.dra.ResourceClaims().Get(member.Namespace, member.Name)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("claim %s not in the scheduler's cache: %v", member.Name, err)
	}
	on := e.pruningCycle(t, testPod("m"), true, nil, nil)
	if on.node != "h100-2" || on.pruned != 0 || on.probes != 0 {
		t.Errorf("member: chose %q, %d nodes pruned, %d probes; want h100-2, none", on.node, on.pruned, on.probes)
	}
}
