package waits

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// randomHolders gives each holder pod a priority and pins some.
type randomHolders struct {
	priority map[types.NamespacedName]int32
	pinned   sets.Set[types.NamespacedName]
}

func (h randomHolders) Priority(p types.NamespacedName) (int32, bool) {
	v, ok := h.priority[p]
	return v, ok
}
func (h randomHolders) Pinned(p types.NamespacedName) bool { return h.pinned.Has(p) }

// claimIndex is the claims' holders by device, as the scheduler's
// claim index finds them.
type claimIndex map[structured.DeviceID][]types.NamespacedName

func (c claimIndex) HoldersOf(id structured.DeviceID) []types.NamespacedName { return c[id] }

// randomCluster is nodes of H100, A100 or L4 GPUs with two driver versions,
// some tainted unhealthy or reserved (by the pod's namespace's reservation or
// another's), and claims holding some of them for pods of random priority.
func randomCluster(rng *rand.Rand, nodes int) ([]*resourceapi.ResourceSlice, []*resourceapi.ResourceClaim, randomHolders) {
	models := []string{"H100", "A100", "L4"}
	reserved := []string{"ml.serving", "team-b.batch"}
	holders := randomHolders{priority: map[types.NamespacedName]int32{}, pinned: sets.New[types.NamespacedName]()}
	var slices []*resourceapi.ResourceSlice
	var claims []*resourceapi.ResourceClaim
	for n := range nodes {
		node := fmt.Sprintf("node-%03d", n)
		s := modelSlice(node, models[rng.IntN(len(models))], []string{"535", "570"}[rng.IntN(2)], 1+rng.IntN(8))
		s.Name = node
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			switch rng.IntN(8) {
			case 0:
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: gpuv1.UnhealthyTaintKey, Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule})
			case 1:
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: reserved[rng.IntN(2)], Effect: resourceapi.DeviceTaintEffectNoSchedule})
			}
			if rng.IntN(2) == 0 {
				continue
			}
			pod := types.NamespacedName{Namespace: "team-b", Name: fmt.Sprintf("%s-%s", node, d.Name)}
			holders.priority[pod] = int32(rng.IntN(3) * 100)
			if rng.IntN(6) == 0 {
				holders.pinned.Insert(pod)
			}
			var reservedFor []resourceapi.ResourceClaimConsumerReference
			if rng.IntN(5) > 0 { // an allocation not yet reserved for its pod has no holder
				reservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name}}
			}
			claims = append(claims, &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
				Status: resourceapi.ResourceClaimStatus{ReservedFor: reservedFor, Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: gpuv1.DriverName, Pool: node, Device: d.Name}}}}},
			})
		}
		slices = append(slices, s)
	}
	return slices, claims, holders
}

// TestCandidatesCountLikeThePool: on random clusters, counting a tier from
// its candidates and an inventory (what WaitReason does in a scheduling
// cycle) gives exactly what CountTier gives from a whole pool built with
// every claim, for every tier shape: a model, a model and a driver
// version, a tolerated reservation, no selector at all.
func TestCandidatesCountLikeThePool(t *testing.T) {
	dc := &resourceapi.DeviceClass{Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
		{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", gpuv1.DriverName)}}}}}
	model := func(m string) string { return fmt.Sprintf(`device.attributes[%q].model == %q`, gpuv1.DriverName, m) }
	driver := fmt.Sprintf(`device.attributes[%q].driverVersion >= "570"`, gpuv1.DriverName)
	tolerate := []resourceapi.DeviceToleration{{Key: gpuv1.ReservedTaintKey, Operator: resourceapi.DeviceTolerationOpEqual, Value: "ml.serving", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	tiers := []gpupool.Tier{
		{Name: "h100", Class: "gpu", Count: 4, Selectors: []string{model("H100")}},
		{Name: "a100", Class: "gpu", Count: 2, Selectors: []string{model("A100"), driver}},
		{Name: "h100", Class: "gpu", Count: 1, Selectors: []string{model("H100")}, Tolerations: tolerate},
		{Name: "any", Class: "gpu", Count: 8},
		{Name: "h200", Class: "gpu", Count: 1, Selectors: []string{model("H200")}},
	}
	r := gpupool.Request{Name: "gpu", Tiered: true, Tiers: tiers}
	cache := &CandidateCache{}
	// seen sums what the random clusters exercised, so that the comparison
	// cannot pass on counts that are all zero.
	seen := map[string]int{}
	for seed := range uint64(25) {
		rng := rand.New(rand.NewPCG(seed, 41))
		slices, claims, holders := randomCluster(rng, 5+rng.IntN(40))
		pool := gpupool.NewPool(slices, claims, nil)
		allocated := sets.New[structured.DeviceID]()
		held := claimIndex{}
		for _, c := range claims {
			res := c.Status.Allocation.Devices.Results[0]
			id := structured.MakeDeviceID(res.Driver, res.Pool, res.Device)
			allocated.Insert(id)
			for _, ref := range c.Status.ReservedFor {
				held[id] = append(held[id], types.NamespacedName{Namespace: c.Namespace, Name: ref.Name})
			}
		}
		inv := &gpupool.Inventory{Slices: gpupool.NewSlices(slices), Allocated: allocated}
		priority := int32(rng.IntN(3) * 100)
		for i := range tiers {
			m, err := gpupool.NewMatcher(classes{"gpu": dc}, gpupool.NewCELCache(), gpupool.NewMatchCache(), tiers[i])
			if err != nil {
				t.Fatal(err)
			}
			want := CountTier(t.Context(), pool, m, r, i, priority, "ml", holders)
			got := CountCandidates(inv, cache.Get(t.Context(), inv.Slices, m), r, i, priority, "ml", holders, held)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("seed %d, tier %d: candidates count differs from the pool's (-pool +candidates):\n%s", seed, i, diff)
			}
			for name, m := range map[string]map[string]int{"free": got.Free, "tainted": got.Tainted, "reserved": got.Reserved,
				"preemptible": got.Preemptible, "pinned": got.Pinned} {
				seen[name] += sum(m)
			}
			seen["other model"] += got.OtherModel
			seen["unmet"] += len(got.Unmet)
		}
	}
	for _, name := range []string{"free", "tainted", "reserved", "preemptible", "pinned", "other model", "unmet"} {
		if seen[name] == 0 {
			t.Errorf("no random cluster had a %s device: the comparison does not cover it (%v)", name, seen)
		}
	}
	t.Logf("counted over all clusters: %v", seen)
}

// TestCandidateCacheFollowsTheView: the candidates of a matcher are found
// once per slice view; a new view (slices republished) finds them anew.
func TestCandidateCacheFollowsTheView(t *testing.T) {
	m, err := gpupool.NewMatcher(classes{"gpu": &resourceapi.DeviceClass{}}, gpupool.NewCELCache(), gpupool.NewMatchCache(),
		gpupool.Tier{Name: "h100", Class: "gpu", Count: 1, Selectors: []string{fmt.Sprintf(`device.attributes[%q].model == "H100"`, gpuv1.DriverName)}})
	if err != nil {
		t.Fatal(err)
	}
	before := gpupool.NewSlices([]*resourceapi.ResourceSlice{modelSlice("n1", "H100", "570", 2), modelSlice("n2", "A100", "570", 4)})
	var c CandidateCache
	first := c.Get(t.Context(), before, m)
	if again := c.Get(t.Context(), before, m); again != first {
		t.Error("the same view and matcher found the candidates again")
	}
	if got := first.Nodes; !cmp.Equal(got, []string{"n1"}) || len(first.ByNode["n1"]) != 2 || first.otherModel != 4 {
		t.Errorf("candidates %v (%d on n1, %d other model), want n1's 2 H100 and 4 other model", got, len(first.ByNode["n1"]), first.otherModel)
	}
	after := gpupool.NewSlices([]*resourceapi.ResourceSlice{modelSlice("n1", "H100", "570", 2), modelSlice("n2", "H100", "570", 4)})
	if got := c.Get(t.Context(), after, m); !cmp.Equal(got.Nodes, []string{"n1", "n2"}) || got.otherModel != 0 {
		t.Errorf("after n2 became an H100 node: candidates %v, other model %d", got.Nodes, got.otherModel)
	}
}
