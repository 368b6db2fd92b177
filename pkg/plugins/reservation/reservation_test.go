package reservation

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/plugins/cyclestate"
	"github.com/rota-dev/rota/pkg/waits"
)

// TestPreFilterAndFilter runs a pod through PreFilter and, where it passes,
// Filter on the reservation's node with the claims already allocated there.
func TestPreFilterAndFilter(t *testing.T) {
	ts := rotav1.ReservationTimeSliced
	base := func() world {
		return world{
			reservations: []*rotav1.GPUReservation{boundReservation("team-a", "serving", ts, "md-a", "md-b", "md-d")},
			deployments:  []string{"md-a", "md-b", "md-d", "md-x"},
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
	// with adds claims to w (allocated ones are what the GPUs hold).
	with := func(w world, claims ...*resourceapi.ResourceClaim) world {
		addClaims(w.claims, claims...)
		return w
	}
	// Members already on gpu-0: a (40960) and b (92160) = 133120 MiB.
	onGPU0 := func(w world) world {
		return with(w, allocated(claim("team-a", "a-held", "team-a.serving", 40960), "gpu-0"), allocated(claim("team-a", "b-held", "team-a.serving", 92160), "gpu-0"))
	}
	twoGPUs := func(w world) world {
		heldGPUs(w.reservations[0], 2)
		return w
	}
	tests := map[string]struct {
		world      world
		pod        *v1.Pod
		wantCode   fwk.Code
		wantNodes  []string
		wantFilter fwk.Code
		wantMsg    []string
		// wantWait is the wait reason of the refusal recorded for the
		// WaitReason plugin; "" when none is (not an admission answer).
		wantWait waits.Reason
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
			wantWait: waits.ReservationOvercommitted,
			world:    onGPU0(base()), pod: pod("team-a", "d-0", "md-d", "d", ""), wantNodes: []string{"n1"},
			wantFilter: fwk.UnschedulableAndUnresolvable,
			wantMsg:    []string{"ReservationOvercommitted", "on gpu-0, the held GPU with the most room, claims hold 133120 MiB in 2 claim(s)", "asks 8192 MiB: 141312 > 136582"},
		},
		"claims on GPUs the reservation does not hold do not count": {
			world: with(base(), allocated(claim("team-b", "elsewhere", "", 140000), "gpu-5")), pod: pod("team-a", "d-0", "md-d", "d", ""),
			wantNodes: []string{"n1"},
		},
		"a claim asking 2 devices costs twice": {
			wantWait: waits.ReservationOvercommitted,
			world:    with(base(), withCount(claim("team-a", "pair", "team-a.serving", 70000), 2)), pod: pod("team-a", "a-6", "md-a", "pair", ""),
			wantNodes: []string{"n1"}, wantFilter: fwk.UnschedulableAndUnresolvable,
			wantMsg: []string{"ReservationOvercommitted", "asks 2 × 70000 MiB for request gpu of claim pair, which no choice of held GPUs fits"},
		},
		"a 2-device claim fits 2 held GPUs, one device each": {
			world: twoGPUs(with(base(), withCount(claim("team-a", "pair", "team-a.serving", 70000), 2))), pod: pod("team-a", "a-6", "md-a", "pair", ""),
			wantNodes: []string{"n1"},
		},
		"the budget is per GPU, not pooled": {
			wantWait: waits.ReservationOvercommitted,
			// 100000 on each of 2 GPUs: the pool has 73164 MiB left, no GPU has 50000.
			world: twoGPUs(with(base(), allocated(claim("team-a", "x0", "team-a.serving", 100000), "gpu-0"), allocated(claim("team-a", "x1", "team-a.serving", 100000), "gpu-1"),
				claim("team-a", "half", "team-a.serving", 50000))),
			pod: pod("team-a", "a-7", "md-a", "half", ""), wantNodes: []string{"n1"}, wantFilter: fwk.UnschedulableAndUnresolvable,
			wantMsg: []string{"budget is 136582 MiB per GPU (2 GPU(s) held)", "on gpu-0, the held GPU with the most room, claims hold 100000 MiB in 1 claim(s)", "asks 50000 MiB: 150000 > 136582"},
		},
		"a member that fits the GPU with room is admitted": {
			world: twoGPUs(with(base(), allocated(claim("team-a", "x0", "team-a.serving", 100000), "gpu-0"), claim("team-a", "half", "team-a.serving", 50000))),
			pod:   pod("team-a", "a-7", "md-a", "half", ""), wantNodes: []string{"n1"},
		},
		"a member asking more than one GPU's budget is refused at once": {
			wantWait: waits.ReservationOvercommitted,
			world:    with(base(), claim("team-a", "huge", "team-a.serving", 140000)), pod: pod("team-a", "a-8", "md-a", "huge", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationOvercommitted", "pod asks 140000 MiB but GPUReservation team-a/serving allows 136582 MiB per GPU"},
		},
		"a member whose vLLM takes more than its budget is refused with both numbers": {
			wantWait: waits.ReservationOvercommitted,
			world:    base(), pod: withContainer(pod("team-a", "a-9", "md-a", "a", ""), "vllm/vllm-openai", "--model", "m", "--gpu-memory-utilization", "0.9"),
			wantCode: fwk.UnschedulableAndUnresolvable,
			wantMsg: []string{"ReservationArgsConflict: container main runs vLLM with --gpu-memory-utilization 0.9, 129393 MiB of the 143771 MiB GPU",
				"may use 40960 MiB of it (memoryMiB), 0.2848 of the GPU", "--gpu-memory-utilization 0.2848 or less"},
		},
		"vLLM's default counts when the flag is absent": {
			wantWait: waits.ReservationOvercommitted,
			world:    base(), pod: withContainer(pod("team-a", "a-9", "md-a", "a", ""), "vllm/vllm-openai", "--model", "m"),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationArgsConflict", "0.9 (vLLM's default: the flag is not given)"},
		},
		"a member whose vLLM keeps within its budget is admitted": {
			world: base(), pod: withContainer(pod("team-a", "a-9", "md-a", "a", ""), "vllm/vllm-openai", "--gpu-memory-utilization=0.2848"),
			wantNodes: []string{"n1"},
		},
		"forged labels do not make a member": {
			wantWait: waits.Reserved,
			world:    base(), pod: func() *v1.Pod {
				p := pod("team-a", "f", "", "a", "")
				p.Labels = map[string]string{"app": "md-a"}
				return p
			}(),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotMember", "(no controller)", "not a member of GPUReservation team-a/serving"},
		},
		"a forged ReplicaSet UID does not make a member": {
			wantWait: waits.Reserved,
			world:    base(), pod: func() *v1.Pod {
				p := pod("team-a", "f", "md-a", "a", "")
				p.OwnerReferences[0].UID = "forged"
				return p
			}(),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotMember", "unverified: f names controller ReplicaSet md-a-rs (uid forged)", "another UID"},
		},
		"another workload of the namespace is not a member": {
			wantWait: waits.Reserved,
			world:    base(), pod: pod("team-a", "x-0", "md-x", "a", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotMember", "Deployment/md-x"},
		},
		"another namespace cannot tolerate the reservation": {
			wantWait: waits.Reserved,
			world:    base(), pod: pod("team-b", "s", "md-a", "steal", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotMember", "not a reservation of namespace team-b"},
		},
		"member without toleration is told to add it": {
			wantWait: waits.Reserved,
			world:    base(), pod: pod("team-a", "a-2", "md-a", "plain", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationNotTolerated", "rota.dev/reserved=team-a.serving"},
		},
		"time-sliced member without memoryMiB": {
			world: base(), pod: pod("team-a", "a-3", "md-a", "no-mem", ""),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: []string{"ReservationMemoryMissing", "request gpu of claim no-mem gets no memoryMiB"},
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
			wantWait: waits.Reserved,
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
				checkRefusal(t, cs, st, tc.wantWait)
				return
			}
			var nodes []string
			if res != nil {
				nodes = res.NodeNames.UnsortedList()
			}
			if diff := cmp.Diff(tc.wantNodes, nodes); diff != "" {
				t.Errorf("PreFilter nodes (-want +got):\n%s", diff)
			}
			fst := pl.Filter(ctx, cs, tc.pod, nodeN1())
			if diff := cmp.Diff(tc.wantFilter, fst.Code()); diff != "" {
				t.Fatalf("Filter code (-want +got):\n%s\n%v", diff, fst)
			}
			checkMessage(t, fst, tc.wantMsg)
			checkRefusal(t, cs, fst, tc.wantWait)
		})
	}
}

// checkRefusal checks the refusal recorded for node n1 (or every node)
// against want, and that its message is what the status says.
func checkRefusal(t *testing.T, cs fwk.CycleState, st *fwk.Status, want waits.Reason) {
	t.Helper()
	r, ok := cyclestate.RefusalOf(cs, Name, "n1")
	if want == "" {
		if ok {
			t.Errorf("refusal recorded: %+v, want none", r)
		}
		return
	}
	if !ok || r.Reason != want {
		t.Fatalf("refusal %+v (recorded %v), want reason %s", r, ok, want)
	}
	if !strings.HasSuffix(st.Message(), r.Message) {
		t.Errorf("refusal message %q is not what the status says: %q", r.Message, st.Message())
	}
}

// withContainer gives p a container "main" of image with args.
func withContainer(p *v1.Pod, image string, args ...string) *v1.Pod {
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "main", Image: image, Args: args})
	return p
}

func nodeN1() fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{})
	ni.Node().Name = "n1"
	return ni
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

// TestPendingAllocationsCount: a claim the allocator gave a held GPU in
// Reserve counts before its allocation is written, and once written (or
// assumed), it counts once.
func TestPendingAllocationsCount(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	first, second := claim("team-a", "first", "team-a.serving", 70000), claim("team-a", "second", "team-a.serving", 70000)
	w := world{
		reservations: []*rotav1.GPUReservation{boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a")},
		deployments:  []string{"md-a"},
		claims:       addClaims(claimMap{}, first, second),
		pending:      pendingAllocations{},
	}
	pl := w.plugin(t)
	p := pod("team-a", "a-1", "md-a", "second", "")
	run := func() *fwk.Status {
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, cs, p, nil); !st.IsSuccess() {
			t.Fatalf("PreFilter: %v", st)
		}
		return pl.Filter(ctx, cs, p, nodeN1())
	}
	if st := run(); !st.IsSuccess() {
		t.Fatalf("nothing held yet: %v", st)
	}
	w.pending[first.UID] = allocation(first, "gpu-0")
	if st := run(); !strings.Contains(st.Message(), "claims hold 70000 MiB in 1 claim(s)") {
		t.Errorf("with the first claim's allocation pending: %v, want it counted", st)
	}
	// Written: in the tracker and (until PreBind clears it) still pending.
	w.claims["team-a/first"] = allocated(first, "gpu-0")
	if st := run(); !strings.Contains(st.Message(), "claims hold 70000 MiB in 1 claim(s)") {
		t.Errorf("written and pending: %v, want it counted once", st)
	}
	delete(w.pending, first.UID)
	delete(w.claims, "team-a/first")
	if st := run(); !st.IsSuccess() {
		t.Errorf("after the first claim is gone: %v, want admitted", st)
	}
}

// TestReserveChecksTheChosenGPU: Filter admits a member because gpu-1 has
// room, the allocator gives it gpu-0, which has not: Reserve refuses with
// both numbers, and while the GPUs' usage is the same the next attempt is
// refused in Filter with the same message; once it changes, Filter lets the
// pod try again.
func TestReserveChecksTheChosenGPU(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	busy, c := allocated(claim("team-a", "busy", "team-a.serving", 100000), "gpu-0"), claim("team-a", "c", "team-a.serving", 50000)
	w := world{
		reservations: []*rotav1.GPUReservation{heldGPUs(boundReservation("team-a", "serving", rotav1.ReservationTimeSliced, "md-a"), 2)},
		deployments:  []string{"md-a"},
		claims:       addClaims(claimMap{}, busy, c),
		pending:      pendingAllocations{},
	}
	pl := w.plugin(t)
	p := pod("team-a", "a-1", "md-a", "c", "")
	attempt := func() (fwk.CycleState, *fwk.Status) {
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, cs, p, nil); !st.IsSuccess() {
			t.Fatalf("PreFilter: %v", st)
		}
		return cs, pl.Filter(ctx, cs, p, nodeN1())
	}
	cs, st := attempt()
	if !st.IsSuccess() {
		t.Fatalf("Filter: %v, want admitted (gpu-1 has room)", st)
	}
	w.pending[c.UID] = allocation(c, "gpu-0")
	st = pl.Reserve(ctx, cs, p, "n1")
	checkMessage(t, st, []string{"ReservationOvercommitted", "the allocator chose gpu-0 for this pod (member md-a)", "claims hold 100000 MiB in 1 claim(s) and this pod asks 50000 MiB: 150000 > 136582"})
	if st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("Reserve code %v, want UnschedulableAndUnresolvable", st.Code())
	}
	delete(w.pending, c.UID) // DynamicResources' Unreserve
	pl.Unreserve(ctx, cs, p, "n1")
	_, st = attempt()
	checkMessage(t, st, []string{"ReservationOvercommitted", "the allocator chose gpu-0"})
	if st.IsSuccess() {
		t.Error("second attempt in the same state admitted, want the remembered refusal")
	}
	delete(w.claims, "team-a/busy")
	if _, st := attempt(); !st.IsSuccess() {
		t.Errorf("after gpu-0 was freed: %v, want admitted", st)
	}
	w.pending[c.UID] = allocation(c, "gpu-0")
	if st := pl.Reserve(ctx, cs, p, "n1"); !st.IsSuccess() {
		t.Errorf("Reserve on a free gpu-0: %v", st)
	}
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

func TestIsSchedulableAfterOwnerChange(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	waiting := pod("team-a", "a-0", "md-a", "a", "")
	tests := map[string]struct {
		obj  any
		want fwk.QueueingHint
	}{
		"a ReplicaSet of the pod's namespace": {obj: replicaSet("team-a", "md-a"), want: fwk.Queue},
		"an unstructured workload of the namespace (dynamic informer)": {
			obj: func() any {
				u := &unstructured.Unstructured{}
				u.SetNamespace("team-a")
				u.SetName("llm")
				return u
			}(), want: fwk.Queue,
		},
		"another namespace's": {obj: replicaSet("team-b", "md-a"), want: fwk.QueueSkip},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := isSchedulableAfterOwnerChange(logger, waiting, nil, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

// Owners' events are registered so that a pod tried before its owner
// reached the scheduler's informer is tried again; LeaderWorkerSets only
// where the API is served.
func TestEventsToRegisterOwners(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := world{}.plugin(t)
	resources := func() []fwk.EventResource {
		evs, err := pl.EventsToRegister(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []fwk.EventResource
		for _, e := range evs {
			out = append(out, e.Event.Resource)
		}
		return out
	}
	if got := resources(); slices.Contains(got, lwsEventResource) || !slices.Contains(got, "statefulsets.v1.apps") {
		t.Errorf("without the LeaderWorkerSet API: %v", got)
	}
	pl.owners.LeaderWorkerSets = cache.NewGenericLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), rotav1.LeaderWorkerSetsResource.GroupResource())
	if got := resources(); !slices.Contains(got, lwsEventResource) {
		t.Errorf("with the LeaderWorkerSet API: %v", got)
	}
}
