package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
)

// TestShippedProfileInRealScheduler runs the rota-scheduler profile of
// manifests/scheduler in kube-scheduler's own scheduler — its queue, its
// Filter and Score over 16 goroutines, its binding goroutines and
// informers — against fake clientsets. Integration packages, which start a
// kube-apiserver, run without -race; this test keeps the race detector on
// Rota's plugins as the scheduler binary runs them.
//
// Pods with one tiered claim each (H100, else A100) are created from
// several goroutines while the scheduler runs, on more nodes than the
// scheduler handles in one goroutine. Every pod must be bound, no GPU
// granted twice, and the H100s all taken before any A100 (Tiering); a pod
// asking for a model no node has stays pending, with Rota's Waiting
// condition.
func TestShippedProfileInRealScheduler(t *testing.T) {
	const (
		ns          = "race"
		h100Nodes   = 6
		a100Nodes   = 20
		gpusPerNode = 8
		tieredPods  = 60 // more than the H100s, fewer than all GPUs
		creators    = 6
	)
	ctx := testContext(t)
	cluster := newFakeCluster(t)
	modelOf := map[string]string{} // node → model of its GPUs
	objs := []runtime.Object{gpuClass()}
	for i := range h100Nodes + a100Nodes {
		name, model := fmt.Sprintf("h100-%02d", i), "H100"
		if i >= h100Nodes {
			name, model = fmt.Sprintf("a100-%02d", i-h100Nodes), "A100"
		}
		node, slice := gpuNode(name, model, gpusPerNode)
		modelOf[name] = model
		objs = append(objs, node, slice)
	}
	if err := cluster.create(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	startScheduler(ctx, t, cluster, shippedConfig(t))

	createTieredPodsConcurrently(ctx, t, cluster, ns, tieredPods, creators)
	unfit, unfitClaim := tieredGPUPod(ns, "wants-b200", "B200")
	if err := cluster.create(ctx, unfitClaim, unfit); err != nil {
		t.Fatal(err)
	}

	pods, claims := waitForOutcome(ctx, t, cluster, ns, tieredPods, unfit.Name)

	granted := assertOneDevicePerClaimOnItsNode(t, pods, claims)
	assertH100sTakenFirst(t, granted, modelOf, h100Nodes*gpusPerNode)
	assertNodesFilledOneAtATime(t, granted, modelOf, gpusPerNode)
	assertTierAnnotations(t, pods, granted, modelOf)
	assertWaiting(t, pods[unfit.Name], claims[unfitClaim.Name])
}

// createTieredPodsConcurrently creates n tiered pods (tiered-0 ...), each
// after its claim, from creators goroutines at once.
func createTieredPodsConcurrently(ctx context.Context, t *testing.T, c *fakeCluster, ns string, n, creators int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range creators {
		wg.Go(func() {
			for i := g; i < n; i += creators {
				pod, claim := tieredGPUPod(ns, fmt.Sprintf("tiered-%d", i), "H100", "A100")
				if err := c.create(ctx, claim, pod); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// waitForOutcome polls the fake until bound pods of ns are bound and the
// pod named waiting carries Rota's Waiting condition (the scheduler has
// tried it), and returns the pods and claims of ns by name. The deadline
// only guards against a hang.
func waitForOutcome(ctx context.Context, t *testing.T, c *fakeCluster, ns string, bound int, waiting string) (map[string]*v1.Pod, map[string]*resourceapi.ResourceClaim) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	defer cancel()
	var (
		pods     map[string]*v1.Pod
		progress string
	)
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods = map[string]*v1.Pod{}
		n := 0
		for i := range list.Items {
			p := &list.Items[i]
			pods[p.Name] = p
			if p.Spec.NodeName != "" {
				n++
			}
		}
		tried := pods[waiting] != nil && waits.Current(pods[waiting]) != nil
		progress = fmt.Sprintf("%d of %d pods bound, %s has a Waiting condition: %t", n, bound, waiting, tried)
		return n >= bound && tried, nil
	})
	if err != nil {
		t.Fatalf("scheduling did not settle: %v; %s", err, progress)
	}
	list, err := c.client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]*resourceapi.ResourceClaim{}
	for i := range list.Items {
		claims[list.Items[i].Name] = &list.Items[i]
	}
	return pods, claims
}

// grantedDevice is a device as the allocator names it: pool (the node) and
// device in the pool.
type grantedDevice struct{ pool, device string }

// assertOneDevicePerClaimOnItsNode checks that every bound pod's claim was
// granted one device of its node, reserved for the pod, and that no device
// was granted to two claims. It returns the device of each bound pod.
func assertOneDevicePerClaimOnItsNode(t *testing.T, pods map[string]*v1.Pod, claims map[string]*resourceapi.ResourceClaim) map[string]grantedDevice {
	t.Helper()
	granted := map[string]grantedDevice{}
	holder := map[grantedDevice]string{}
	for name, pod := range pods {
		if pod.Spec.NodeName == "" {
			continue
		}
		claim := claims[*pod.Spec.ResourceClaims[0].ResourceClaimName]
		if claim == nil || claim.Status.Allocation == nil {
			t.Errorf("pod %s is bound to %s, its claim is not allocated", name, pod.Spec.NodeName)
			continue
		}
		if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != pod.UID {
			t.Errorf("claim %s is reserved for %v, want pod %s only", claim.Name, claim.Status.ReservedFor, name)
		}
		results := claim.Status.Allocation.Devices.Results
		if len(results) != 1 {
			t.Errorf("claim %s got %d devices, want 1: %v", claim.Name, len(results), results)
			continue
		}
		d := grantedDevice{pool: results[0].Pool, device: results[0].Device}
		if d.pool != pod.Spec.NodeName {
			t.Errorf("pod %s is bound to %s, its claim got %s/%s", name, pod.Spec.NodeName, d.pool, d.device)
		}
		if other, taken := holder[d]; taken {
			t.Errorf("device %s/%s granted to the claims of both %s and %s", d.pool, d.device, other, name)
		}
		holder[d] = name
		granted[name] = d
	}
	return granted
}

// assertH100sTakenFirst checks Tiering's promise to the pods that prefer
// H100: no pod got an A100 while an H100 was free, so with A100s in use
// every one of the h100s H100s is taken.
func assertH100sTakenFirst(t *testing.T, granted map[string]grantedDevice, modelOf map[string]string, h100s int) {
	t.Helper()
	count := map[string]int{}
	for _, d := range granted {
		count[modelOf[d.pool]]++
	}
	t.Logf("granted: %d H100, %d A100", count["H100"], count["A100"])
	if count["A100"] > 0 && count["H100"] != h100s {
		t.Errorf("%d A100s granted while only %d of %d H100s are: H100s must be taken first", count["A100"], count["H100"], h100s)
	}
}

// assertNodesFilledOneAtATime checks Tiering's packing: a pod goes to
// the node of its tier that it leaves with the fewest free GPUs, so at
// most one node of each model is partly used and whole nodes stay free.
func assertNodesFilledOneAtATime(t *testing.T, granted map[string]grantedDevice, modelOf map[string]string, gpusPerNode int) {
	t.Helper()
	used := map[string]int{}
	for _, d := range granted {
		used[d.pool]++
	}
	partly := map[string][]string{}
	for node, n := range used {
		if n < gpusPerNode {
			partly[modelOf[node]] = append(partly[modelOf[node]], fmt.Sprintf("%s (%d of %d)", node, n, gpusPerNode))
		}
	}
	for model, nodes := range partly {
		if len(nodes) > 1 {
			slices.Sort(nodes)
			t.Errorf("%d %s nodes partly used, want at most one: %s", len(nodes), model, strings.Join(nodes, ", "))
		}
	}
}

// assertTierAnnotations checks that each bound pod carries the tier it was
// granted in rota.dev/tier, written with its binding by Tiering's Bind.
func assertTierAnnotations(t *testing.T, pods map[string]*v1.Pod, granted map[string]grantedDevice, modelOf map[string]string) {
	t.Helper()
	want := map[string]string{"H100": "1/2: H100", "A100": "2/2: A100"}
	for name, d := range granted {
		if got := pods[name].Annotations[gpuv1.TierAnnotation]; got != want[modelOf[d.pool]] {
			t.Errorf("pod %s on %s/%s: %s=%q, want %q", name, d.pool, d.device, gpuv1.TierAnnotation, got, want[modelOf[d.pool]])
		}
	}
}

// assertWaiting checks that pod is unbound, its claim unallocated, and
// that it carries Rota's Waiting condition, true: InsufficientCapacity.
func assertWaiting(t *testing.T, pod *v1.Pod, claim *resourceapi.ResourceClaim) {
	t.Helper()
	if pod.Spec.NodeName != "" {
		t.Errorf("pod %s, whose GPU model no node has, is bound to %s", pod.Name, pod.Spec.NodeName)
	}
	if claim.Status.Allocation != nil {
		t.Errorf("claim %s of pod %s is allocated: %v", claim.Name, pod.Name, claim.Status.Allocation.Devices.Results)
	}
	c := waits.Current(pod)
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != string(waits.InsufficientCapacity) {
		t.Errorf("pod %s: %s condition %+v, want status True, reason %s", pod.Name, gpuv1.WaitingCondition, c, waits.InsufficientCapacity)
		return
	}
	t.Logf("pod %s waits: %s: %s", pod.Name, c.Reason, c.Message)
}
