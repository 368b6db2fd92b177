package reservation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// TestPreFilterAndFilter runs a pod through PreFilter and, where it passes,
// Filter on the reservation's node with the members already there.
func TestPreFilterAndFilter(t *testing.T) {
	ts := rotav1.ReservationTimeSliced
	base := func() world {
		return world{
			reservations: []*rotav1.GPUReservation{boundReservation("team-a", "serving", ts, "md-a", "md-b", "md-d")},
			replicaSets:  []*appsv1.ReplicaSet{replicaSet("team-a", "md-a"), replicaSet("team-a", "md-b"), replicaSet("team-a", "md-d"), replicaSet("team-a", "md-x")},
			claims: addClaims(claimMap{},
				claim("team-a", "a", "team-a.serving", 40960),
				claim("team-a", "b", "team-a.serving", 92160),
				claim("team-a", "d", "team-a.serving", 8192),
				claim("team-a", "plain", "", 1024),
				claim("team-a", "no-mem", "team-a.serving", 0),
				claim("team-b", "steal", "team-a.serving", 1024),
			),
		}
	}
	// Members already on n1: a (40960) and b (92160) = 133120 MiB.
	onNode := []*v1.Pod{pod("team-a", "a-0", "md-a", "a", "n1"), pod("team-a", "b-0", "md-b", "b", "n1")}
	tests := map[string]struct {
		world      world
		pod        *v1.Pod
		nodePods   []*v1.Pod
		wantCode   fwk.Code
		wantNodes  []string
		wantFilter fwk.Code
		wantMsg    []string
	}{
		"pod without claims is skipped": {
			world: base(), pod: &v1.Pod{}, wantCode: fwk.Skip,
		},
		"ordinary pod is skipped": {
			world: base(), pod: pod("team-a", "p", "", "plain", ""), wantCode: fwk.Skip,
		},
		"member pinned to the node and admitted within budget": {
			world: base(), pod: pod("team-a", "a-1", "md-a", "a", ""), wantNodes: []string{"n1"},
		},
		"member over budget refused with numbers": {
			world: base(), pod: pod("team-a", "d-0", "md-d", "d", ""), nodePods: onNode, wantNodes: []string{"n1"},
			wantFilter: fwk.UnschedulableAndUnresolvable,
			wantMsg:    []string{"ReservationOvercommitted", "members hold 133120 MiB in 2 pod(s)", "asks 8192 MiB: 141312 > 136582"},
		},
		"members of other reservations and namespaces do not count": {
			world: base(), pod: pod("team-a", "d-0", "md-d", "d", ""),
			nodePods:  []*v1.Pod{pod("team-a", "p-0", "", "plain", "n1"), pod("team-b", "a-0", "md-a", "a", "n1"), onNode[0]},
			wantNodes: []string{"n1"},
		},
		"forged labels do not make a member": {
			world: base(), pod: func() *v1.Pod {
				p := pod("team-a", "f", "", "a", "")
				p.Labels = map[string]string{"app": "md-a"}
				return p
			}(),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotMember", "(no controller)", "not a member of GPUReservation team-a/serving"},
		},
		"another workload of the namespace is not a member": {
			world: base(), pod: pod("team-a", "x-0", "md-x", "a", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotMember", "Deployment/md-x"},
		},
		"another namespace cannot tolerate the reservation": {
			world: base(), pod: pod("team-b", "s", "md-a", "steal", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotMember", "not a reservation of namespace team-b"},
		},
		"member without toleration is told to add it": {
			world: base(), pod: pod("team-a", "a-2", "md-a", "plain", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotTolerated", "rota.dev/reserved=team-a.serving"},
		},
		"time-sliced member without memoryMiB": {
			world: base(), pod: pod("team-a", "a-3", "md-a", "no-mem", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationMemoryMissing", "declares memoryMiB"},
		},
		"exclusive member without memoryMiB is fine": {
			world: func() world {
				w := base()
				w.reservations[0].Spec.Mode = rotav1.ReservationExclusive
				return w
			}(),
			pod: pod("team-a", "a-3", "md-a", "no-mem", ""), wantNodes: []string{"n1"},
		},
		"a toleration of every reservation is refused": {
			world: func() world {
				w := base()
				c := claim("team-a", "wild", "", 1024)
				c.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpExists}}
				addClaims(w.claims, c)
				return w
			}(),
			pod:      pod("team-a", "a-4", "md-a", "wild", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotMember", "tolerates every rota.dev/reserved taint"},
		},
		"listed by two reservations: the tolerated one decides the node": {
			world: func() world {
				w := base()
				other := boundReservation("team-a", "aaa-first-by-name", ts, "md-a")
				other.Spec.NodeName = "n2"
				w.reservations = append(w.reservations, other)
				return w
			}(),
			pod: pod("team-a", "a-5", "md-a", "a", ""), wantNodes: []string{"n1"},
		},
		"pending reservation holds no GPUs yet": {
			world: func() world {
				w := base()
				w.reservations[0].Status = rotav1.GPUReservationStatus{Phase: rotav1.ReservationPending}
				return w
			}(),
			pod: pod("team-a", "a-1", "md-a", "a", ""), wantCode: fwk.Unschedulable, wantMsg: []string{"ReservationNotHeld"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pl := tc.world.plugin(t)
			cs := framework.NewCycleState()
			res, st := pl.PreFilter(ctx, cs, tc.pod, nil)
			if diff := cmp.Diff(tc.wantCode, st.Code()); diff != "" {
				t.Fatalf("PreFilter code (-want +got):\n%s\n%v", diff, st)
			}
			if tc.wantCode != fwk.Success {
				checkMessage(t, st, tc.wantMsg)
				return
			}
			var nodes []string
			if res != nil {
				nodes = res.NodeNames.UnsortedList()
			}
			if diff := cmp.Diff(tc.wantNodes, nodes); diff != "" {
				t.Errorf("PreFilter nodes (-want +got):\n%s", diff)
			}
			ni := framework.NewNodeInfo(tc.nodePods...)
			ni.SetNode(&v1.Node{})
			ni.Node().Name = "n1"
			fst := pl.Filter(ctx, cs, tc.pod, ni)
			if diff := cmp.Diff(tc.wantFilter, fst.Code()); diff != "" {
				t.Fatalf("Filter code (-want +got):\n%s\n%v", diff, fst)
			}
			checkMessage(t, fst, tc.wantMsg)
		})
	}
}

func checkMessage(t *testing.T, st *fwk.Status, wants []string) {
	t.Helper()
	msg := st.Message()
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q lacks %q", msg, w)
		}
	}
}

// TestReserveAccounting: members between Reserve and binding count once,
// whether or not the scheduler cache shows them on the node yet, and
// Unreserve gives their budget back.
func TestReserveAccounting(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := world{
		reservations: []*rotav1.GPUReservation{boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a")},
		replicaSets:  []*appsv1.ReplicaSet{replicaSet("team-a", "md-a")},
		claims:       addClaims(claimMap{}, claim("team-a", "big", "team-a.serving", 70000)),
	}
	pl := w.plugin(t)
	first, second := pod("team-a", "a-0", "md-a", "big", ""), pod("team-a", "a-1", "md-a", "big", "")
	node := func(pods ...*v1.Pod) fwk.NodeInfo {
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(&v1.Node{})
		ni.Node().Name = "n1"
		return ni
	}
	run := func(p *v1.Pod, ni fwk.NodeInfo) (fwk.CycleState, *fwk.Status) {
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, cs, p, nil); !st.IsSuccess() {
			t.Fatalf("PreFilter %s: %v", p.Name, st)
		}
		return cs, pl.Filter(ctx, cs, p, ni)
	}
	cs, st := run(first, node())
	if !st.IsSuccess() {
		t.Fatalf("first member refused: %v", st)
	}
	if st := pl.Reserve(ctx, cs, first, "n1"); !st.IsSuccess() {
		t.Fatal(st)
	}
	// Reserved, cache not showing it: the ledger counts it.
	if _, st := run(second, node()); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("second member with the first in flight: %v, want overcommitted", st)
	}
	// Reserved and assumed in the cache: still counted once (70000 + 70000 > 136582, but not 3×).
	_, st = run(second, node(withNode(first)))
	if !strings.Contains(st.Message(), "members hold 70000 MiB in 1 pod(s)") {
		t.Errorf("counted twice? %v", st)
	}
	pl.Unreserve(ctx, cs, first, "n1")
	if _, st := run(second, node()); !st.IsSuccess() {
		t.Errorf("after Unreserve: %v, want admitted", st)
	}
}

func withNode(p *v1.Pod) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.NodeName = "n1"
	return p
}

func TestIsSchedulableAfterPodDeleted(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	waiting := pod("team-a", "d-0", "md-d", "d", "")
	tests := map[string]struct {
		deleted *v1.Pod
		want    fwk.QueueingHint
	}{
		"member of the same namespace frees budget": {deleted: pod("team-a", "a-0", "md-a", "a", "n1"), want: fwk.Queue},
		"other namespace cannot":                    {deleted: pod("team-b", "a-0", "md-a", "a", "n1"), want: fwk.QueueSkip},
		"pod without claims cannot":                 {deleted: &v1.Pod{}, want: fwk.QueueSkip},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := isSchedulableAfterPodDeleted(logger, waiting, tc.deleted, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}
