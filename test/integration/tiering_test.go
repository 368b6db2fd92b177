package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/plugins/tiering"
	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/test/integration/framework"
)

// The policy version the shipped manifests/scheduler/config.yaml sets.
const shippedPolicyVersion = "policy tiering-v1"

// placed is where one pod landed: what a user reads from the pod and claim.
type placed struct {
	Node, Device, Request, Tier string
}

// placeAndWait creates a tiered pod, waits for it to bind and its claim to
// be allocated, and returns where it landed.
func placeAndWait(t *testing.T, cp *framework.ControlPlane, pod *v1.Pod) placed {
	t.Helper()
	cp.Create(t, pod)
	bound := cp.WaitForPodBound(t, pod.Namespace, pod.Name)
	claim := cp.PodClaim(t, bound, "gpu")
	res := claim.Status.Allocation.Devices.Results
	if len(res) != 1 {
		t.Fatalf("pod %s: claim has %d devices, want 1", pod.Name, len(res))
	}
	return placed{
		Node:    bound.Spec.NodeName,
		Device:  res[0].Pool + "/" + res[0].Device,
		Request: res[0].Request,
		Tier:    cp.WaitForPodAnnotation(t, pod.Namespace, pod.Name, gpuv1.TierAnnotation),
	}
}

func tieredPod(ns, name, template string) *v1.Pod {
	return framework.GPUPod(ns, name, scheduler.ProfileName, template)
}

// TestTieringFallback is the fallback scenario (docs/design.md#scenario-fallback): H100s fill first, then A100; a freed
// H100 takes the next pod; the placement is explained on the pod.
func TestTieringFallback(t *testing.T) {
	cp := framework.StartControlPlane(t)
	const ns = "fallback"
	cp.Create(t,
		framework.DeviceClass(),
		framework.Node("node-a100"), framework.GPUSlice("node-a100", framework.GPUs(framework.A100, 2)...),
		framework.Node("node-h100"), framework.GPUSlice("node-h100", framework.GPUs(framework.H100, 2)...),
		framework.Node("node-l4"), framework.GPUSlice("node-l4", framework.GPUs(framework.L4, 2)...),
		framework.Namespace(ns),
		framework.TieredClaimTemplate(ns, "h100-else-a100", framework.ModelTier("H100"), framework.ModelTier("A100")),
	)
	cp.StartClaimController(t)
	cp.StartScheduler(t)

	var got []placed
	for i := range 4 {
		got = append(got, placeAndWait(t, cp, tieredPod(ns, fmt.Sprintf("p%d", i), "h100-else-a100")))
	}
	want := []placed{
		{Node: "node-h100", Device: "node-h100/gpu-0", Request: "gpu/h100", Tier: "1/2: H100"},
		{Node: "node-h100", Device: "node-h100/gpu-1", Request: "gpu/h100", Tier: "1/2: H100"},
		{Node: "node-a100", Device: "node-a100/gpu-0", Request: "gpu/a100", Tier: "2/2: A100"},
		{Node: "node-a100", Device: "node-a100/gpu-1", Request: "gpu/a100", Tier: "2/2: A100"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}

	p0, err := cp.Client.CoreV1().Pods(ns).Get(context.Background(), "p0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantNote := "1 × H100 on node-h100 (gpu-0), tier 1/2; " + shippedPolicyVersion
	framework.WaitFor(t, "placement event on p0", func(context.Context) (bool, string, error) {
		notes := cp.PodEventNotes(t, p0, "TieredPlacement")
		return len(notes) == 1 && notes[0] == wantNote, fmt.Sprintf("%q", notes), nil
	})

	// Everything is taken: the next pod waits, and the reason counts nodes per tier.
	cp.Create(t, tieredPod(ns, "waiting", "h100-else-a100"))
	cp.WaitForPodUnschedulable(t, ns, "waiting",
		"Tiering ("+shippedPolicyVersion+"): tier 1/2 h100: 0 of 3 nodes — ",
		"1 no free device",
		"tier 2/2 a100: 0 of 3 nodes — ")

	// Freeing an H100 sends the waiting pod back to H100.
	cp.DeletePodNow(t, ns, "p1")
	waiting := cp.WaitForPodBound(t, ns, "waiting")
	if waiting.Spec.NodeName != "node-h100" {
		t.Errorf("after freeing an H100 the waiting pod went to %s, want node-h100", waiting.Spec.NodeName)
	}
	if tier := cp.WaitForPodAnnotation(t, ns, "waiting", gpuv1.TierAnnotation); tier != "1/2: H100" {
		t.Errorf("waiting pod tier %q, want 1/2: H100", tier)
	}
}

// TestTieringSkipsUnhealthyH100: a tainted H100 is never chosen, and when
// only tainted H100s are left the pod falls back and the wait says why.
func TestTieringSkipsUnhealthyH100(t *testing.T) {
	cp := framework.StartControlPlane(t)
	const ns = "health"
	cp.Create(t,
		framework.DeviceClass(),
		// node-h100-a sorts first and would win on name; its only H100 turns unhealthy.
		framework.Node("node-h100-a"), framework.GPUSlice("node-h100-a", framework.H100),
		framework.Node("node-h100-b"), framework.GPUSlice("node-h100-b", framework.H100),
		framework.Node("node-a100"), framework.GPUSlice("node-a100", framework.A100),
		framework.Namespace(ns),
		framework.TieredClaimTemplate(ns, "h100-else-a100", framework.ModelTier("H100"), framework.ModelTier("A100")),
	)
	cp.StartClaimController(t)
	cp.StartScheduler(t)
	cp.SetDeviceTaints(t, "node-h100-a", "gpu-0", framework.UnhealthyTaint)

	got := placeAndWait(t, cp, tieredPod(ns, "first", "h100-else-a100"))
	if want := (placed{Node: "node-h100-b", Device: "node-h100-b/gpu-0", Request: "gpu/h100", Tier: "1/2: H100"}); got != want {
		t.Errorf("placement %+v, want %+v", got, want)
	}
	got = placeAndWait(t, cp, tieredPod(ns, "second", "h100-else-a100"))
	if want := (placed{Node: "node-a100", Device: "node-a100/gpu-0", Request: "gpu/a100", Tier: "2/2: A100"}); got != want {
		t.Errorf("placement %+v, want %+v", got, want)
	}
	cp.Create(t, tieredPod(ns, "third", "h100-else-a100"))
	cp.WaitForPodUnschedulable(t, ns, "third",
		"tier 1/2 h100: 0 of 3 nodes — 1 no H100",
		"1 no free device", "1 tainted gpu.rota.dev/unhealthy")

	// The GPU heals: the waiting pod is queued by the slice update and takes it.
	cp.SetDeviceTaints(t, "node-h100-a", "gpu-0")
	if pod := cp.WaitForPodBound(t, ns, "third"); pod.Spec.NodeName != "node-h100-a" {
		t.Errorf("after the H100 healed the pod went to %s, want node-h100-a", pod.Spec.NodeName)
	}
}

// TestTieringUnmetConstraintStaysPending: an L4-only cluster cannot serve
// "H100 else A100", and a hard memory floor is never relaxed by a fallback.
// Nothing the scheduler could do helps, and the reason names the constraint.
func TestTieringUnmetConstraintStaysPending(t *testing.T) {
	cp := framework.StartControlPlane(t)
	const ns = "constraints"
	a100small := framework.A100
	a100small.MemoryGiB = 40
	cp.Create(t,
		framework.DeviceClass(),
		framework.Node("node-l4"), framework.GPUSlice("node-l4", framework.GPUs(framework.L4, 2)...),
		framework.Node("node-a100-40"), framework.GPUSlice("node-a100-40", a100small),
		framework.Namespace(ns),
		framework.TieredClaimTemplate(ns, "h100-else-a100", framework.ModelTier("H100"), framework.ModelTier("A100")),
		framework.TieredClaimTemplate(ns, "80gi", framework.MinMemoryTier("H100", 80), framework.MinMemoryTier("A100", 80)),
	)
	cp.StartClaimController(t)
	cp.StartScheduler(t)

	// Only the 40 GiB A100 could serve tier 2 of the plain template: use it up.
	got := placeAndWait(t, cp, tieredPod(ns, "takes-a100", "h100-else-a100"))
	if got.Node != "node-a100-40" || got.Tier != "2/2: A100" {
		t.Fatalf("placement %+v, want node-a100-40 at 2/2: A100", got)
	}
	cp.Create(t, tieredPod(ns, "l4-only", "h100-else-a100"))
	cp.WaitForPodUnschedulable(t, ns, "l4-only",
		`tier 1/2 h100: 0 of 2 nodes — 2 no H100`,
		`tier 2/2 a100: 0 of 2 nodes — 1 no A100, 1 no free device`)

	cp.DeletePodNow(t, ns, "takes-a100")
	cp.Create(t, tieredPod(ns, "needs-80gi", "80gi"))
	cp.WaitForPodUnschedulable(t, ns, "needs-80gi",
		`tier 2/2 a100: 0 of 2 nodes — 1 constraint not met: device.attributes["gpu.rota.dev"].model == "A100" && device.capacity["gpu.rota.dev"].memory.compareTo(quantity("80Gi")) >= 0, 1 no A100`)
	pod, err := cp.Client.CoreV1().Pods(ns).Get(context.Background(), "needs-80gi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		t.Errorf("pod needing 80 GiB bound to %s with a 40 GiB A100 free", pod.Spec.NodeName)
	}
}

// TestTieringBeatsResourceBalancing: the H100 node carries most of the CPU
// requests, so NodeResourcesFit and NodeResourcesBalancedAllocation prefer
// the idle A100 node. The stock profile follows them; with Tiering the
// better tier wins.
func TestTieringBeatsResourceBalancing(t *testing.T) {
	for name, tc := range map[string]struct {
		stock bool
		want  func(i int) placed
	}{
		"stock profile takes the A100": {stock: true, want: func(i int) placed {
			return placed{Node: "node-a100", Device: fmt.Sprintf("node-a100/gpu-%d", i), Request: "gpu/a100"}
		}},
		"Rota profile takes the H100": {want: func(i int) placed {
			return placed{Node: "node-h100", Device: fmt.Sprintf("node-h100/gpu-%d", i), Request: "gpu/h100", Tier: "1/2: H100"}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			cp := framework.StartControlPlane(t)
			const ns = "balance"
			cp.Create(t,
				framework.DeviceClass(),
				framework.Node("node-a100"), framework.GPUSlice("node-a100", framework.GPUs(framework.A100, 8)...),
				framework.Node("node-h100"), framework.GPUSlice("node-h100", framework.GPUs(framework.H100, 8)...),
				framework.Namespace(ns),
				framework.BoundPod(ns, "cpu-hog", "node-h100", "56"),
				framework.TieredClaimTemplate(ns, "h100-else-a100", framework.ModelTier("H100"), framework.ModelTier("A100")),
			)
			cp.StartClaimController(t)
			if tc.stock {
				cp.StartSchedulerWithout(t, tiering.Name)
			} else {
				cp.StartScheduler(t)
			}
			for i := range 3 {
				pod := framework.WithCPU(tieredPod(ns, fmt.Sprintf("p%d", i), "h100-else-a100"), "2")
				var got placed
				if tc.stock {
					got = placeUnannotated(t, cp, pod)
				} else {
					got = placeAndWait(t, cp, pod)
				}
				if want := tc.want(i); got != want {
					t.Errorf("pod p%d: placement %+v, want %+v", i, got, want)
				}
			}
		})
	}
}

// placeUnannotated is placeAndWait for a scheduler without Tiering.
func placeUnannotated(t *testing.T, cp *framework.ControlPlane, pod *v1.Pod) placed {
	t.Helper()
	cp.Create(t, pod)
	bound := cp.WaitForPodBound(t, pod.Namespace, pod.Name)
	res := cp.PodClaim(t, bound, "gpu").Status.Allocation.Devices.Results
	return placed{Node: bound.Spec.NodeName, Device: res[0].Pool + "/" + res[0].Device, Request: res[0].Request}
}

// TestTieringDeterministic replays the same cluster and pod sequence on five
// fresh control planes: every pod gets the same node and device each time.
func TestTieringDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("five control planes")
	}
	const runs, pods = 5, 100
	var first []placed
	for run := range runs {
		got := deterministicRun(t, run, pods)
		if run == 0 {
			first = got
			continue
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Fatalf("run %d placed differently from run 0 (-run0 +run%d):\n%s", run, run, diff)
		}
	}
	tiers := map[string]int{}
	for _, p := range first {
		tiers[p.Tier]++
	}
	t.Logf("%d pods, identical in %d runs; tiers: %v", pods, runs, tiers)
	if tiers["1/3: H100"] != 48 || tiers["2/3: A100"] != 52 {
		t.Errorf("tiers %v, want all 48 H100s used before 52 A100s", tiers)
	}
}

func deterministicRun(t *testing.T, run, pods int) []placed {
	var out []placed
	t.Run(fmt.Sprintf("run-%d", run), func(t *testing.T) {
		cp := framework.StartControlPlane(t)
		const ns = "replay"
		objs := []any{framework.DeviceClass(), framework.Namespace(ns),
			framework.TieredClaimTemplate(ns, "h100-a100-l4",
				framework.ModelTier("H100"), framework.ModelTier("A100"), framework.ModelTier("L4"))}
		// 22 nodes interleaved by name: 6 × 8 H100, 8 × 8 A100, 8 × 8 L4.
		for i := range 22 {
			gpu := []framework.GPU{framework.H100, framework.A100, framework.L4}[i%3]
			if i >= 18 {
				gpu = framework.A100
			}
			if i >= 20 {
				gpu = framework.L4
			}
			name := fmt.Sprintf("node-%02d", i)
			objs = append(objs, framework.Node(name), framework.GPUSlice(name, framework.GPUs(gpu, 8)...))
		}
		cp.Create(t, objs...)
		cp.StartClaimController(t)
		cp.StartScheduler(t)
		for i := range pods {
			out = append(out, placeAndWait(t, cp, tieredPod(ns, fmt.Sprintf("pod-%03d", i), "h100-a100-l4")))
		}
	})
	if len(out) != pods {
		t.FailNow()
	}
	for i := range out {
		out[i].Tier = strings.TrimSpace(out[i].Tier)
	}
	return out
}
