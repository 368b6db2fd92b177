package waitreason

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
	"github.com/rota-dev/rota/pkg/waits"
)

// A waiting pod is retried after every cluster event that might help it,
// and most retries fail the same way. Its classification depends on the
// attempt (which plugin rejected which node: read anew every time, it is
// cheap), on the pod, and on the cluster's devices, claims, pods and
// disruption budgets. The last are summed up by a change count: every
// informer event of a ResourceClaim, a pod placed or gone (or relabelled:
// budgets select by label) and a PodDisruptionBudget adds one, and so does
// every Reserve and Unreserve of this scheduler (allocations in flight are
// not in the informers). A pod's verdict is reused while the count, the
// slice view, its requests' selectors and the attempt are what they were.
//
// The count is read in WaitReason's PreFilter, which the profile runs
// before every other PreFilter, so before any plugin takes the cycle's
// inventory: a verdict stored under a count was computed from an inventory
// at least that new, and any later event makes the count differ.

// changesKey is where PreFilter leaves the cycle's change count.
const changesKey fwk.StateKey = "RotaWaitReason/changes"

type cycleChanges uint64

func (c cycleChanges) Clone() fwk.StateData { return c }

var _ fwk.PreFilterPlugin = &WaitReason{}

// PreFilter reads the change count for PostFilter. It filters nothing.
func (pl *WaitReason) PreFilter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	cs.Write(changesKey, cycleChanges(pl.changes.Load()))
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin; there are none.
func (pl *WaitReason) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// changesOf returns the count PreFilter read, and false when it did not
// run (a profile without WaitReason's PreFilter reuses nothing).
func changesOf(cs fwk.CycleState) (uint64, bool) {
	data, err := cs.Read(changesKey)
	if err != nil {
		return 0, false
	}
	c, ok := data.(cycleChanges)
	return uint64(c), ok
}

// watchChanges counts the informer events a classification depends on.
func (pl *WaitReason) watchChanges(h fwk.Handle) error {
	bump := func(any) { pl.changes.Add(1) }
	bumpAll := cache.ResourceEventHandlerFuncs{AddFunc: bump, UpdateFunc: func(_, _ any) { pl.changes.Add(1) }, DeleteFunc: bump}
	f := h.SharedInformerFactory()
	if _, err := f.Resource().V1().ResourceClaims().Informer().AddEventHandler(bumpAll); err != nil {
		return err
	}
	if _, err := f.Policy().V1().PodDisruptionBudgets().Informer().AddEventHandler(bumpAll); err != nil {
		return err
	}
	_, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    bump,
		DeleteFunc: bump,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Pod)
			n, ok2 := newObj.(*v1.Pod)
			if !ok1 || !ok2 || o.Spec.NodeName != n.Spec.NodeName || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
				o.Status.Phase != n.Status.Phase || !maps.Equal(o.Labels, n.Labels) {
				pl.changes.Add(1)
			}
		},
	})
	return err
}

// reuseKey is what a pod's verdict was computed from, beyond the change
// count.
type reuseKey struct {
	changes uint64
	view    *gpupool.Slices
	gang    string
	// matchers are the Key of each request's tiers' matchers, in order.
	matchers []string
	// rejections digests the attempt's node rejections (attemptDigest);
	// the admission answers are kept whole.
	rejections                               uint64
	quota, reservation, notMember, gang2turn string
}

func (k *reuseKey) equal(o *reuseKey) bool {
	return k.changes == o.changes && k.view == o.view && k.gang == o.gang && slices.Equal(k.matchers, o.matchers) &&
		k.rejections == o.rejections && k.quota == o.quota && k.reservation == o.reservation &&
		k.notMember == o.notMember && k.gang2turn == o.gang2turn
}

// attemptKey fills the key's part that the attempt decides: its admission
// answers, and a digest of its rejections and of the nodes DynamicResources
// rejected. A waiting pod's attempt can reject thousands of nodes; the
// digest keeps a stored verdict small. It sums a hash per entry, so the
// order the nodes were read in does not matter.
func (k *reuseKey) attemptKey(a *waits.Attempt, dra map[string]bool) {
	k.quota, k.reservation, k.notMember, k.gang2turn = a.Quota, a.Reservation, a.NotMember, a.Gang+"\x00"+a.Turn
	var sum uint64
	for node, reason := range a.Rejections {
		sum += entryHash("r", node, reason)
	}
	for node := range dra {
		sum += entryHash("d", node, "")
	}
	k.rejections = sum
}

// entryHash is FNV-1a of kind, node and reason, NUL-separated, computed
// in place: hash/fnv would allocate per node.
func entryHash(kind, node, reason string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, part := range [...]string{kind, node, reason} {
		for i := 0; i < len(part); i++ {
			h = (h ^ uint64(part[i])) * prime
		}
		h *= prime // the separator: XOR with 0 leaves h as it is
	}
	return h
}

// verdicts are the pods' last verdicts and what they were computed from.
type verdicts struct {
	mu    sync.Mutex
	byPod map[types.UID]storedVerdict
	// counted and reused count classifications, for tests and benchmarks.
	counted, reused atomic.Uint64
}

type storedVerdict struct {
	key     reuseKey
	verdict waits.Verdict
}

func newVerdicts() *verdicts { return &verdicts{byPod: map[types.UID]storedVerdict{}} }

func (v *verdicts) get(uid types.UID, key *reuseKey) (waits.Verdict, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.byPod[uid]
	if !ok || !s.key.equal(key) {
		return waits.Verdict{}, false
	}
	v.reused.Add(1)
	return s.verdict, true
}

func (v *verdicts) put(uid types.UID, key reuseKey, verdict waits.Verdict) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.byPod[uid] = storedVerdict{key: key, verdict: verdict}
}

func (v *verdicts) forget(uid types.UID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.byPod, uid)
}

func gangOf(pod *v1.Pod) string { return pod.Labels[gpuv1.GangLabel] }
